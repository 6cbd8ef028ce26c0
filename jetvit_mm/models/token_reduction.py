"""A training-free token-reduction baseline for dense prediction: Expedit-style token clustering (docs/method.md).

Blocks ``after + 1 .. until`` run on the prefix tokens and a coarse grid of clusters (local soft k-means); the
full-resolution tokens are reconstructed parameter-free (``x_i = x_i(after) + sum_k a_ik (c_k(now) - c_k(after))``)
after ``until`` and at every ``out_indices`` layer. ``factor=1`` runs the teacher's own code, bit for bit. Use
:class:`TokenClusteringJetViT` like a JetViT (``clustering='f2@1-9'``), or :func:`apply_token_clustering` in place.
"""
import functools
import math
import re
from dataclasses import dataclass, fields
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F

from .caching import plain_tensors
from .jetvit import JetViT

SPEC_PATTERN = re.compile(r'f(\d+)@(\d+)(?:-(\d+))?')
SPEC_SYNTAX = ('f<FACTOR>@<AFTER>[-<UNTIL>] (e.g. f2@3: 2x2 tokens per cluster, blocks 4.. on clusters; f2@3-9: '
               'full resolution again after block 9)')
# the 3 x 3 neighbourhood of a cell: the clusters a token may join
OFFSETS = tuple((dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1))


@dataclass(frozen=True)
class ClusterSpec:
    """Strength of the token clustering: ``factor`` x ``factor`` tokens per cluster (1: none), clustered after block
    ``after``, reconstructed after block ``until`` (None: the last block)."""
    factor: int
    after: int
    until: Optional[int] = None
    iters: int = 3
    temperature: float = 0.1

    @property
    def active(self) -> bool:
        return self.factor > 1

    @property
    def text(self) -> str:
        """The spec's short form (``f2@3``, ``f2@3-9``; other ``iters``/``temperature`` appended)."""
        text = f'f{self.factor}@{self.after}' + (f'-{self.until}' if self.until is not None else '')
        if (self.iters, self.temperature) != (3, 0.1):
            text += f' (iters={self.iters}, temperature={self.temperature:g})'
        return text

    def resolved_until(self, depth: int) -> int:
        return depth - 1 if self.until is None else self.until

    def check(self, depth: int) -> 'ClusterSpec':
        """Raise ValueError naming the bad field unless the spec fits a ``depth``-layer model; returns it."""
        if not isinstance(self.factor, int) or isinstance(self.factor, bool) or self.factor < 1:
            raise ValueError(f'clustering factor must be an integer >= 1 (tokens per cluster side; 1: none), '
                             f'got {self.factor!r}')
        if not isinstance(self.iters, int) or isinstance(self.iters, bool) or self.iters < 0:
            raise ValueError(f'clustering iters must be an integer >= 0, got {self.iters!r}')
        if not isinstance(self.temperature, (int, float)) or not math.isfinite(self.temperature) \
                or self.temperature <= 0:
            raise ValueError(f'clustering temperature must be a finite number > 0, got {self.temperature!r}')
        until = self.resolved_until(depth)
        if not isinstance(self.after, int) or isinstance(self.after, bool) or not 0 <= self.after < depth - 1:
            raise ValueError(f'clustering after={self.after!r}: must be a block index in 0..{depth - 2} of this '
                             f'{depth}-layer model (at least one block must run on the clusters)')
        if not isinstance(until, int) or isinstance(until, bool) or not self.after < until <= depth - 1:
            raise ValueError(f'clustering until={self.until!r}: must be a block index in {self.after + 1}..'
                             f'{depth - 1} (after < until <= last block)')
        return self


def parse_cluster_spec(spec: Union[str, Mapping[str, object], ClusterSpec], depth: int) -> ClusterSpec:
    """A :class:`ClusterSpec` from its short form (``'f2@3'``, ``'f2@3-9'``), a dict of its fields or itself, checked
    against a ``depth``-layer model."""
    if isinstance(spec, ClusterSpec):
        return spec.check(depth)
    if isinstance(spec, str):
        match = SPEC_PATTERN.fullmatch(spec.strip())
        if not match:
            raise ValueError(f'clustering {spec!r}: expected {SPEC_SYNTAX}')
        factor, after, until = match.groups()
        return ClusterSpec(int(factor), int(after), int(until) if until is not None else None).check(depth)
    if isinstance(spec, Mapping):
        valid = [f.name for f in fields(ClusterSpec)]
        unknown = sorted(set(spec) - set(valid))
        if unknown or 'factor' not in spec or 'after' not in spec:
            raise ValueError(f'clustering dict: unknown keys {unknown}, or factor/after missing; valid keys: '
                             f'{", ".join(valid)} (factor and after required), got {dict(spec)!r}')
        return ClusterSpec(**spec).check(depth)
    raise ValueError(f'clustering must be a string ({SPEC_SYNTAX}), a dict or a ClusterSpec, got {spec!r}')


# ----------------------------------------------------------------------------- cells and neighbourhoods

def to_cells(tokens: torch.Tensor, grid: Tuple[int, int], factor: int) -> torch.Tensor:
    """Patch tokens ``[B, H*W, C]`` as ``[B, h, w, factor**2, C]`` cells of the coarse grid (zero-padded to whole
    cells: ``h = ceil(H / factor)``)."""
    (H, W), B, C = grid, tokens.shape[0], tokens.shape[-1]
    h, w = -(-H // factor), -(-W // factor)
    x = F.pad(tokens.reshape(B, H, W, C), (0, 0, 0, w * factor - W, 0, h * factor - H))
    return x.reshape(B, h, factor, w, factor, C).permute(0, 1, 3, 2, 4, 5).reshape(B, h, w, factor * factor, C)


def from_cells(cells: torch.Tensor, grid: Tuple[int, int], factor: int) -> torch.Tensor:
    """The inverse of :func:`to_cells`: ``[B, H*W, C]``, the padding dropped."""
    (H, W), (B, h, w, _, C) = grid, cells.shape
    x = cells.reshape(B, h, w, factor, factor, C).permute(0, 1, 3, 2, 4, 5).reshape(B, h * factor, w * factor, C)
    return x[:, :H, :W].reshape(B, H * W, C)


def neighbour_index(h: int, w: int, device: torch.device) -> torch.Tensor:
    """Flat indices into the zero-padded ``(h + 2) x (w + 2)`` grid of each cell's 3 x 3 neighbourhood,
    ``[h * w * 9]`` (cell-major, :data:`OFFSETS` order): kept per grid and device as a plain tensor (one first built
    under ``inference_mode`` still serves a later backward), built afresh while torch.compile traces."""
    if torch.compiler.is_compiling():
        return _neighbour_index(h, w, device)
    return _kept_neighbour_index(h, w, device)


@functools.lru_cache(maxsize=16)
def _kept_neighbour_index(h: int, w: int, device: torch.device) -> torch.Tensor:
    with plain_tensors():
        return _neighbour_index(h, w, device)


def _neighbour_index(h: int, w: int, device: torch.device) -> torch.Tensor:
    dy = torch.tensor([o[0] for o in OFFSETS], device=device)
    dx = torch.tensor([o[1] for o in OFFSETS], device=device)
    ys = torch.arange(h, device=device)[:, None, None] + 1 + dy
    xs = torch.arange(w, device=device)[None, :, None] + 1 + dx
    return (ys * (w + 2) + xs).reshape(-1)


def neighbours(centres: torch.Tensor) -> torch.Tensor:
    """``[B, h, w, C]`` -> ``[B, h, w, 9, C]``: each cell's 3 x 3 neighbourhood (zeros outside the grid)."""
    B, h, w, C = centres.shape
    padded = F.pad(centres, (0, 0, 1, 1, 1, 1)).reshape(B, (h + 2) * (w + 2), C)
    return padded.index_select(1, neighbour_index(h, w, centres.device)).view(B, h, w, 9, C)


def scatter_to_neighbours(values: torch.Tensor) -> torch.Tensor:
    """The transpose of :func:`neighbours`: ``[B, h, w, 9, C]`` summed into the cells they came from, ``[B, h, w,
    C]`` (what each cell's tokens send to neighbour k lands in that neighbour)."""
    B, h, w, _, C = values.shape
    out = values.new_zeros(B, (h + 2) * (w + 2), C)
    out.index_add_(1, neighbour_index(h, w, values.device), values.reshape(B, h * w * 9, C))
    return out.view(B, h + 2, w + 2, C)[:, 1:h + 1, 1:w + 1]


@dataclass
class Clustering:
    """What reconstruction needs: the soft assignment ``[B, h, w, factor**2, 9]`` of every token to its neighbouring
    clusters, the clusters and tokens at clustering time, the grids and the clusters' RoPE."""
    assignment: torch.Tensor
    centres: torch.Tensor
    tokens: torch.Tensor
    grid: Tuple[int, int]
    cluster_grid: Tuple[int, int]
    factor: int
    rope: Optional[torch.Tensor]


def check_temperature(temperature: float, dtype: torch.dtype) -> None:
    """Refuse a temperature below ``torch.finfo(dtype).tiny`` of the compute ``dtype``: a cosine similarity over it
    overflows (or the temperature rounds to 0) and every feature comes out NaN."""
    if not dtype.is_floating_point:
        return
    tiny = torch.finfo(dtype).tiny
    if temperature < tiny:
        raise ValueError(f'clustering temperature {temperature!r} is below what {dtype} computes with: it must be at '
                         f'least {tiny!r} (torch.finfo({dtype}).tiny), else the similarities over it overflow and '
                         f'every feature is NaN')


def check_factor(factor: int, grid: Tuple[int, int]) -> None:
    """Refuse a factor above ``max(grid)``: one cluster already holds every token, a larger factor only pads."""
    if factor > max(grid):
        raise ValueError(f'clustering factor {factor} is larger than this input\'s patch grid {grid[0]}x{grid[1]}: '
                         f'it must be at most {max(grid)} (a factor of {max(grid)} already makes one cluster)')


def soft_assignment(cells_normed: torch.Tensor, valid: torch.Tensor, centres: torch.Tensor,
                    temperature: float) -> torch.Tensor:
    """Each token's softmax over the cosine similarity to the clusters of its 3 x 3 neighbourhood, ``[B, h, w, t,
    9]``; padding tokens get weight 0, clusters outside the grid are never chosen."""
    neigh = neighbours(F.normalize(centres, dim=-1))
    inside = neighbours(torch.ones_like(centres[..., :1]))[..., 0] > 0  # [B, h, w, 9]
    sim = torch.einsum('bhwtc,bhwkc->bhwtk', cells_normed, neigh)
    check_temperature(temperature, sim.dtype)  # the dtype the division runs in (autocast's, if on)
    sim = sim / temperature
    sim = sim.masked_fill(~inside[:, :, :, None, :], float('-inf'))
    return sim.softmax(dim=-1) * valid


def cluster_tokens(tokens: torch.Tensor, grid: Tuple[int, int], factor: int, iters: int,
                   temperature: float) -> Tuple[torch.Tensor, torch.Tensor, Tuple[int, int]]:
    """Local soft k-means of patch tokens ``[B, H*W, C]``, starting from each cell's mean: the clusters ``[B, h, w,
    C]``, the final assignment and the coarse grid."""
    check_factor(factor, grid)
    cells = to_cells(tokens, grid, factor)
    valid = to_cells(torch.ones_like(tokens[..., :1]), grid, factor)  # [B, h, w, t, 1]
    centres = (cells * valid).sum(3) / valid.sum(3)
    normed = F.normalize(cells, dim=-1)
    for _ in range(iters):
        a = soft_assignment(normed, valid, centres, temperature)
        weight = scatter_to_neighbours(a.sum(3)[..., None])
        total = scatter_to_neighbours(torch.einsum('bhwtk,bhwtc->bhwkc', a, cells))
        centres = torch.where(weight > 1e-6, total / weight.clamp_min(1e-6), centres)
    a = soft_assignment(normed, valid, centres, temperature)
    return centres, a, (cells.shape[1], cells.shape[2])


def reconstruct(state: Clustering, centres: torch.Tensor) -> torch.Tensor:
    """Full-resolution patch tokens ``[B, H*W, C]`` from the clusters ``[B, h*w, C]`` now: each token's own tokens at
    clustering time plus its clusters' change since then, weighted by its assignment."""
    B, (h, w) = centres.shape[0], state.cluster_grid
    change = neighbours(centres.reshape(B, h, w, -1) - state.centres)
    update = torch.einsum('bhwtk,bhwkc->bhwtc', state.assignment.to(change.dtype), change)
    return state.tokens + from_cells(update, state.grid, state.factor)


def cluster_rope(rope: torch.nn.Module, grid: Tuple[int, int], factor: int, like: torch.Tensor) -> torch.Tensor:
    """DINOv3 RoPE (``[h*w, 2 * head_dim]``, ``[sin, cos]``) of the clusters: at the mean normalised position of the
    tokens of each cell (the DINOv3 convention: patch centres in [-1, 1] per side, as timm's ``get_embed``)."""
    if rope.normalize_coords != 'separate' or rope.grid_indexing != 'ij' or float(rope.grid_offset) != 0.:
        raise ValueError('token clustering supports the DINOv3 RoPE convention only (normalize_coords=\'separate\', '
                         f'grid_indexing=\'ij\', grid_offset=0); got {rope.normalize_coords!r}, '
                         f'{rope.grid_indexing!r}, {rope.grid_offset!r}')
    H, W = grid
    ys = (torch.arange(H, dtype=torch.float32, device=like.device) + 0.5) / H * 2 - 1
    xs = (torch.arange(W, dtype=torch.float32, device=like.device) + 0.5) / W * 2 - 1
    coords = torch.stack(torch.meshgrid(ys, xs, indexing='ij'), dim=-1).reshape(1, H * W, 2)
    cells = to_cells(coords, grid, factor)
    valid = to_cells(torch.ones_like(coords[..., :1]), grid, factor)
    centres = ((cells * valid).sum(3) / valid.sum(3)).reshape(-1, 2)
    sin, cos = rope._get_pos_embed_from_coords(centres)
    return torch.cat([sin, cos], dim=-1)


# ----------------------------------------------------------------------------- the model

class TokenClusteringJetViT(JetViT):
    """A JetViT (any arch, any teacher) that runs its middle blocks on token clusters; ``clustering``: ``'f2@3'``, a
    dict of :class:`ClusterSpec`'s fields, or None / factor 1 (the teacher's exact computation)."""

    def __init__(self, *args, clustering: Union[None, str, Mapping[str, object], ClusterSpec] = None,
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.set_clustering(clustering)

    def set_clustering(self, clustering: Union[None, str, Mapping[str, object], ClusterSpec]) -> None:
        """Change the strength (checked against this model's depth and its weights' dtype; the input's patch grid
        and the compute dtype are checked at each forward)."""
        spec = None if clustering is None else parse_cluster_spec(clustering, self.depth)
        if spec is not None and spec.active:
            check_temperature(spec.temperature, next(self.parameters()).dtype)
        self.clustering = spec

    def _cluster(self, x: torch.Tensor, grid: Tuple[int, int]) -> Tuple[torch.Tensor, Clustering]:
        spec, P = self.clustering, self.num_prefix_tokens
        tokens = x[:, P:]
        centres, assignment, cgrid = cluster_tokens(tokens, grid, spec.factor, spec.iters, spec.temperature)
        rope = cluster_rope(self.rope, grid, spec.factor, x) if self.rope is not None else None
        state = Clustering(assignment, centres, tokens, grid, cgrid, spec.factor, rope)
        return torch.cat([x[:, :P], centres.flatten(1, 2)], dim=1), state

    def _full_tokens(self, x: torch.Tensor, take: Sequence[int]) -> Tuple[Dict[int, torch.Tensor], Tuple[int, int]]:
        """Full-resolution tokens ``[B, P + H*W, C]`` (before the final norm) after each block in ``take``."""
        x, grid, rope = self.prepare_tokens(x)
        P, spec, last = self.num_prefix_tokens, self.clustering, max(take)
        until = spec.resolved_until(self.depth)
        state: Optional[Clustering] = None
        outputs = {}
        for i, block in enumerate(self.blocks[:last + 1]):
            if state is None:
                x = self.run_block(block, x, grid, rope)
            else:
                x = self.run_block(block, x, state.cluster_grid, state.rope)
            full = x
            if state is not None and (i in take or i == until):
                full = torch.cat([x[:, :P], reconstruct(state, x[:, P:])], dim=1)
                if i == until:
                    x, state = full, None
            if i in take:
                outputs[i] = full
            if i == spec.after and i < last:
                x, state = self._cluster(x, grid)
        return outputs, grid

    def forward_intermediates(self, x: torch.Tensor, indices: Optional[Sequence[int]] = None, norm: bool = True,
                              output_fmt: str = 'NCHW', return_prefix_tokens: bool = False):
        """As :meth:`JetViT.forward_intermediates`, the clustered layers' outputs reconstructed to full resolution."""
        if self.clustering is None or not self.clustering.active:
            return super().forward_intermediates(x, indices, norm, output_fmt, return_prefix_tokens)
        if output_fmt not in ('NCHW', 'NLC'):
            raise ValueError(f'unknown output_fmt {output_fmt!r}; valid: NCHW, NLC')
        take = self._normalise_indices(indices) if indices is not None else self.out_indices
        tokens, grid = self._full_tokens(x, take)
        out: List = []
        for i in take:
            y = self.norm(tokens[i]) if norm else tokens[i]
            prefix, patches = y[:, :self.num_prefix_tokens], y[:, self.num_prefix_tokens:]
            if output_fmt == 'NCHW':
                patches = patches.transpose(1, 2).reshape(y.shape[0], -1, *grid)
            out.append((patches, prefix) if return_prefix_tokens else patches)
        return out

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """All tokens after the last block (reconstructed) and the final norm, ``[B, prefix + h*w, D]``."""
        if self.clustering is None or not self.clustering.active:
            return super().forward_features(x)
        return self.norm(self._full_tokens(x, (self.depth - 1,))[0][self.depth - 1])


def apply_token_clustering(model: JetViT, clustering: Union[str, Mapping[str, object], ClusterSpec]) -> JetViT:
    """Make a built :class:`~jetvit_mm.models.jetvit.JetViT` (e.g. the backbone of a depth model) cluster its tokens,
    in place (as ToMe patches a timm model); returns it. Its weights and ``out_indices`` are kept."""
    if type(model) not in (JetViT, TokenClusteringJetViT):
        raise TypeError(f'apply_token_clustering takes a jetvit_mm.models.JetViT, got {type(model).__name__} '
                        '(a supernet: export the arch first; a registered mm backbone: build TokenClusteringJetViT)')
    spec = parse_cluster_spec(clustering, model.depth)
    if spec.active:
        check_temperature(spec.temperature, next(model.parameters()).dtype)
    model.__class__ = TokenClusteringJetViT
    model.clustering = spec
    return model


__all__ = ['ClusterSpec', 'TokenClusteringJetViT', 'apply_token_clustering', 'check_factor', 'check_temperature',
           'cluster_tokens', 'parse_cluster_spec', 'reconstruct']
