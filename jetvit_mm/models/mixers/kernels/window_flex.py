"""W with FlexAttention: patch queries, keys and values in window-major order, one window per block pair
(docs/benchmarks.md, 'flex').

Each window's queries (padded to FlexAttention's 128-token block) attend to their window's keys only; their
attention to the few prefix keys is a small product beside Flex, merged by its log-sum-exp (on the CPU, whose
compiled Flex returns none, the prefix keys follow the windows in Flex's key buffer). The prefix queries attend to
every token as plain products: in Flex they would fill one query block that one program per head walks alone.
"""
from typing import Callable, Dict, Optional, Tuple

import torch

from ...caching import plain_tensors
from ..rope import rotate_query_key

BLOCK = 128  # FlexAttention's default sparse block
NO_LSE = ('cpu',)  # device types whose compiled Flex returns no log-sum-exp: the prefix keys go in its key buffer
CACHE_SIZE = 16  # grids (x windows x device) whose masks and token orders are kept
_CACHE: Dict[tuple, object] = {}  # (builder name, *its arguments) -> what it built, in insertion order


def _build_eagerly(name: str, builder: Callable[..., object], *args) -> object:
    """``builder(*args)`` kept in ``_CACHE``; the oldest entry goes beyond ``CACHE_SIZE``. Built as plain tensors
    (:func:`plain_tensors`): a mask first built under ``inference_mode`` still serves a later backward."""
    key = (name, *args)
    if key not in _CACHE:
        while len(_CACHE) >= CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        with plain_tensors():
            _CACHE[key] = builder(*args)
    return _CACHE[key]


def _cached(name: str, builder: Callable[..., object], *args) -> object:
    """What ``builder(*args)`` built, kept per key. Inside a caller's torch.compile a missing one is built in the
    graph (a few small index operations), where an eager build would break the graph for good."""
    found = _CACHE.get((name, *args))
    if found is not None:
        return found
    if torch.compiler.is_compiling():
        return builder(*args)
    return _build_eagerly(name, builder, *args)


def _layout(grid_size: Tuple[int, int], window: Tuple[int, int]) -> Tuple[int, int, int]:
    """(windows down, windows across, token slots per window: the window's patches rounded up to a block)."""
    (h, w), (wh, ww) = grid_size, window
    return -(-h // wh), -(-w // ww), -(-wh * ww // BLOCK) * BLOCK


def _slot_patches(grid_size: Tuple[int, int], window: Tuple[int, int], device: torch.device) -> torch.Tensor:
    """For each window-major slot the row-major patch it holds (padding slots: ``h * w``, one past the last), made
    on ``device``."""
    (h, w), (wh, ww) = grid_size, window
    nh, nw, slots = _layout(grid_size, window)
    index = torch.arange(nh * nw * slots, device=device)
    win, pos = index // slots, index % slots
    row = (win // nw) * wh + pos // ww
    col = (win % nw) * ww + pos % ww
    return torch.where((pos < wh * ww) & (row < h) & (col < w), row * w + col, h * w)


def _token_orders(grid_size: Tuple[int, int], window: Tuple[int, int],
                  device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """For each window-major slot the row-major patch it holds (padding slots: one past the last patch), and for each
    row-major patch the slot that holds it, made on ``device``. The second is a sort of the first: written as index
    arithmetic, inductor's CPU code generation fuses it into the gather back and fails (torch 2.14)."""
    order = _slot_patches(grid_size, window, device)
    return order, order.argsort(stable=True)[:grid_size[0] * grid_size[1]]


def window_token_orders(grid_size: Tuple[int, int], window: Tuple[int, int],
                        device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """The token orders of :func:`_token_orders`, kept per grid, window and device; an input of
    :func:`flex_window_attention`, so that it compiles to one graph."""
    return _cached('token_orders', _token_orders, tuple(grid_size), tuple(window), torch.device(device))


def window_major(x: torch.Tensor, order: torch.Tensor, num_prefix_tokens: int) -> torch.Tensor:
    """The patch rows of ``x`` (``[B, H, P + h * w, C]``) in the window-major ``order``, padding slots zero, in a
    plain 4-D buffer (inductor's CPU Flex template reads the query's underlying buffer as 4-D)."""
    patches = torch.nn.functional.pad(x[:, :, num_prefix_tokens:], (0, 0, 0, 1))  # one zero row for the padding
    return patches[:, :, order]


def window_mask_mod(grid_size: Tuple[int, int], window: Tuple[int, int]):
    """FlexAttention ``mask_mod`` of the window-major layout: a patch query (or a padding slot) sees its window's real
    patches and the prefix keys placed after the windows, if any."""
    (h, w), (wh, ww) = grid_size, window
    nh, nw, slots = _layout(grid_size, window)

    def real(index):
        win, pos = index // slots, index % slots
        row, col = (win // nw) * wh + pos // ww, (win % nw) * ww + pos % ww
        return (pos < wh * ww) & (row < h) & (col < w)

    def mask_mod(b, head, q_index, kv_index):
        return (kv_index >= nh * nw * slots) | (real(kv_index) & ((q_index // slots) == (kv_index // slots)))

    return mask_mod


def window_block_mask(grid_size: Tuple[int, int], window: Tuple[int, int], num_prefix_tokens: int,
                      device: torch.device):
    """The BlockMask of :func:`window_mask_mod`, the patch queries against the window-major keys, followed by the
    prefix keys on the devices in :data:`NO_LSE`: kept per grid, window, prefix and device (:func:`_cached`)."""
    device = torch.device(device)
    return _cached('block_mask', _build_block_mask, tuple(grid_size), tuple(window),
                   num_prefix_tokens if device.type in NO_LSE else 0, device)


def _build_block_mask(grid_size: Tuple[int, int], window: Tuple[int, int], prefix_keys: int, device: torch.device):
    """:func:`window_mask_mod`'s BlockMask built from its blocks, not by evaluating the mask at every query and key:
    a query block sees its window's key blocks, full where all its keys are real patches, else partial; the prefix
    keys' block, if any, partial. In a compiled graph without autograd the backward's copy is left out."""
    from torch.nn.attention.flex_attention import BlockMask

    h, w = grid_size
    nh, nw, slots = _layout(grid_size, window)
    per, q_blocks = slots // BLOCK, nh * nw * slots // BLOCK
    real = (_slot_patches(grid_size, window, device) < h * w).reshape(q_blocks, BLOCK)
    full = real.all(1)
    partial = real.any(1) & ~full
    seen = (torch.arange(q_blocks, device=device) // per * per)[:, None] + torch.arange(per, device=device)
    full, partial = full[seen], partial[seen]  # [query blocks, the window's key blocks]
    if prefix_keys:  # one more key block for every query block: the prefix keys', partial
        seen = torch.cat([seen, seen.new_full((q_blocks, 1), q_blocks)], 1)
        full = torch.cat([full, full.new_zeros(q_blocks, 1)], 1)
        partial = torch.cat([partial, partial.new_ones(q_blocks, 1)], 1)
    kv_blocks = q_blocks + (prefix_keys > 0)

    def packed(flags: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(count, indices: the flagged first), one index column per key block (Flex's check of the mask's size)."""
        first = torch.argsort((~flags).to(torch.uint8), dim=1, stable=True)
        indices = torch.nn.functional.pad(seen.gather(1, first), (0, kv_blocks - seen.shape[1]))
        return flags.sum(1).to(torch.int32)[None, None], indices.to(torch.int32)[None, None].contiguous()

    return BlockMask.from_kv_blocks(*packed(partial), *packed(full), BLOCK_SIZE=BLOCK,
                                    mask_mod=window_mask_mod(grid_size, window),
                                    seq_lengths=(nh * nw * slots, nh * nw * slots + prefix_keys),
                                    compute_q_blocks=not torch.compiler.is_compiling() or torch.is_grad_enabled())


def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The scaled scores ``q k^T`` in fp32 (also under autocast), one side a few prefix tokens: a matmul of the fp32
    copies (an elementwise product summed over channels would hold a ``[B, H, P, N, C]`` fp32 tensor in eager runs)."""
    with torch.autocast(q.device.type, enabled=False):
        return (q.float() @ k.float().transpose(-2, -1)) * q.shape[-1] ** -0.5


def _merge_prefix_keys(patches: torch.Tensor, lse: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                       v: torch.Tensor) -> torch.Tensor:
    """The patch queries ``q``'s attention to the prefix keys ``k`` / values ``v`` merged with their windows'
    (``patches``, Flex's output, and its log-sum-exp ``lse``) by log-sum-exp: fp32 throughout, also under autocast."""
    with torch.autocast(q.device.type, enabled=False):
        scores = _scores(q, k)
        total = torch.logaddexp(lse, scores.logsumexp(-1)).unsqueeze(-1)
        return patches.float() * (lse.unsqueeze(-1) - total).exp() + (scores - total).exp() @ v.float()


def _prefix_queries(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The attention of a few prefix queries to every key, normalised after the product with V. No ``softmax``:
    inductor would turn it back into an SDPA call, whose GPU kernels walk every key with one program per head."""
    scores = _scores(q, k)
    weights = (scores - scores.amax(-1, keepdim=True).detach()).exp()  # the result does not depend on the shift
    return ((weights.to(v.dtype) @ v).float() / weights.sum(-1, keepdim=True)).to(v.dtype)


def flex_window_attention(qkv: torch.Tensor, grid_size: Tuple[int, int], window: Tuple[int, int], num_heads: int,
                          num_prefix_tokens: int, rope: Optional[torch.Tensor], rotate_half: bool, block_mask,
                          token_orders: Tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Window attention of ``qkv`` (``[B, N, 3 * D]``) as :func:`~jetvit_mm.models.mixers.window.window_attention`
    computes it (before ``proj``), with FlexAttention, :func:`window_block_mask` and :func:`window_token_orders`.
    Compiled, one graph: the rotation, padding and gather of q, k, v one fused pass, the gather back and the merge
    another."""
    from torch.nn.attention.flex_attention import AuxRequest, flex_attention

    B, N, D3 = qkv.shape
    P, C = num_prefix_tokens, D3 // (3 * num_heads)
    q, k, v = qkv.reshape(B, N, 3, num_heads, C).permute(2, 0, 3, 1, 4).unbind(0)
    if rope is not None:
        q, k = rotate_query_key(q, k, rope, P, rotate_half)
    out = qkv.new_empty(B, N, num_heads, C)
    if P:  # the prefix queries see every real token
        out[:, :P] = _prefix_queries(q[:, :, :P], k, v).transpose(1, 2)
    order, rows = token_orders
    q_win, k_win, v_win = (window_major(t, order, P) for t in (q, k, v))
    inside = P > 0 and qkv.device.type in NO_LSE  # the prefix keys in Flex's key buffer
    if inside:
        k_win, v_win = torch.cat([k_win, k[:, :, :P]], 2), torch.cat([v_win, v[:, :, :P]], 2)
    merge = P > 0 and not inside
    found = flex_attention(q_win, k_win, v_win, block_mask=block_mask,
                           return_aux=AuxRequest(lse=True) if merge else None)
    patches, lse = (found[0], found[1].lse) if merge else (found, None)
    patches = patches[:, :, rows]  # row-major
    if merge:
        patches = _merge_prefix_keys(patches, lse[:, :, rows], q[:, :, P:], k[:, :, :P], v[:, :, :P])
    out[:, P:] = patches.transpose(1, 2)
    return out.flatten(2)
