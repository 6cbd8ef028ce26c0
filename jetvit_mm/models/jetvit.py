"""JetViT: a DINOv3 / DINOv2 teacher whose per-layer attention is chosen by an arch string."""
import difflib
import inspect
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint as activation_checkpoint

from .arch import ArchSpec, check_spec
from .caching import plain_tensors
from .checkpoint import apply_checkpoint, read
from .mixers import DEFAULT_MIXERS, MixerTable, validate_arch
from .pos_embed import POS_EMBED_INTERP, resize_pos_embed
from .rope_grid import rope_embed_for_grid, rope_embed_on_device
from .teachers import create_teacher, layer_scale, teacher_qkv
from .tracing import check_not_legacy_onnx_export, exporting

INHERIT = ('all', 'mlp')
ROPE_PERIODS = ('checkpoint', 'computed')
TEACHER_ATTN_PARAMS = ('qkv.weight', 'qkv.bias', 'proj.weight', 'proj.bias')
# the arguments that set mixer options before the mixer table (``mixers=``) was the one way: argument -> (letter,
# option); linear_cfg held L options by their own names
REMOVED_ARGUMENTS = {'window_size': ('W', 'window_size'), 'window_kernel': ('W', 'kernel'), 'linear_cfg': ('L', None)}


def refuse_unknown_arguments(model: nn.Module, unknown: Dict[str, Any], mixers: Optional[Dict[str, Any]]) -> None:
    """TypeError for keyword arguments ``model``'s class does not take: one that set a mixer option before
    (:data:`REMOVED_ARGUMENTS`) named with the ``mixers=`` table that sets it now, any other with a close valid name."""
    table, keys, owner = {k: dict(v) for k, v in (mixers or DEFAULT_MIXERS).items()}, [], type(model).__name__
    for name, value in unknown.items():
        if name not in REMOVED_ARGUMENTS:
            valid = sorted({p for c in type(model).__mro__ if '__init__' in vars(c) for p in inspect.signature(
                c.__init__).parameters} - {'self', 'args', 'kwargs', 'unknown'})
            close = difflib.get_close_matches(name, valid, n=1)
            raise TypeError(f'{owner}: unknown argument {name}={value!r}; ' + (
                f'did you mean {close[0]}?' if close else f'remove or correct it (valid: {", ".join(valid)})'))
        letter, option = REMOVED_ARGUMENTS[name]
        values = dict(value) if option is None and isinstance(value, dict) else {option or name: value}
        table[letter] = {**table.get(letter, DEFAULT_MIXERS[letter]), **values}
        keys += [f'mixers.{letter}.{k}' for k in values]
    if unknown:
        raise TypeError(f'{owner}: {", ".join(f"{k}={v!r}" for k, v in unknown.items())}: no longer an argument; set '
                        f'{", ".join(keys)} in the mixer table: mixers={table!r}')


class JetBlock(nn.Module):
    """Pre-norm transformer block with LayerScale whose attention is a JetViT token mixer."""

    def __init__(self, norm1: nn.Module, attn: nn.Module, ls1: nn.Module, drop_path1: nn.Module,
                 norm2: nn.Module, mlp: nn.Module, ls2: nn.Module, drop_path2: nn.Module) -> None:
        super().__init__()
        self.norm1, self.attn, self.ls1, self.drop_path1 = norm1, attn, ls1, drop_path1
        self.norm2, self.mlp, self.ls2, self.drop_path2 = norm2, mlp, ls2, drop_path2

    def forward(self, x: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor] = None):
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x), grid_size, rope)))
        return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))


def _drop_rope_cache(module: nn.Module, incompatible_keys: Any = None) -> None:
    """Forget :meth:`JetViT.rope_embed`'s cached embeds (weights or mode changed): a fresh, empty cache (eager
    forwards only; a compiled graph builds its embed itself)."""
    module._rope_cache = {}


def _copy_teacher_attention(mixer: nn.Module, attn: nn.Module) -> None:
    """Give a mixer that inherits ``qkv_proj`` the timm attention's q/k/v/o (fused; a missing bias becomes 0)."""
    if getattr(mixer, 'inherits', 'qkv_proj') != 'qkv_proj':
        return  # the mixer starts from its own initialisation
    weight, bias = teacher_qkv(attn)
    with torch.no_grad():
        mixer.qkv.weight.copy_(weight)
        if mixer.qkv.bias is not None:
            if bias is not None:
                mixer.qkv.bias.copy_(bias)
            else:
                mixer.qkv.bias.zero_()
        mixer.proj.load_state_dict(attn.proj.state_dict())


class JetViT(nn.Module):
    """A teacher ViT from timm with one token mixer per layer: ``arch`` = one declared letter per layer.

    ``arch='F' * depth`` (the default) is the teacher itself. Every teacher attention weight loads into every mixer
    that inherits ``qkv_proj`` (they share ``qkv``/``proj``); only the mixers' own parameters are new.

    Args:
        model_name: one of :data:`~jetvit_mm.models.variants.VARIANTS` (``dinov3_vitb16``, ``dinov2_vitl14``, ...)
            or a timm model name of a supported family (:mod:`~jetvit_mm.models.teachers`).
        arch: one letter per layer, each declared in ``mixers`` (default L linear, W window, F full attention).
        mixers: the declared letters, letter -> ``dict(type=<registered mixer type>, **options)``; default
            :data:`~jetvit_mm.models.mixers.DEFAULT_MIXERS`. The one way to set a mixer option (``mixers.W.window_size``
            in patches, ``mixers.L.conv``, the deployment switches ``mixers.L.kernel`` / ``mixers.W.kernel``);
            :func:`~jetvit_mm.models.mixers.default_mixers` writes the default table with some options changed.
        checkpoint: local weights in any supported format (official DINOv3, timm, Hugging Face DINOv3,
            DepthAnythingV2, JetViT's own), loaded strictly and safely (:meth:`load_checkpoint`).
        inherit: ``'all'`` keeps the checkpoint's q/k/v/o in every mixer; ``'mlp'`` re-initialises them in
            non-F layers (the paper's comparison).
        out_indices: layers whose outputs ``forward`` returns (negative counts from the end); default: the
            last layer for DINOv3, DepthAnythingV2's tapped layers for DINOv2.
        frozen: no gradients and always eval mode (linear probing).
        grad_checkpointing: recompute each block's activations in the backward (torch's non-reentrant checkpoint, per
            block): same gradients, less memory, one more forward. A training switch, not part of the arch spec.
        drop_path_rate: stochastic depth, linear over depth.
        embed_dim, depth, num_heads: overrides for small models.
        qkv_bias: override the variant's qkv bias (DINOv3 S/B/L in timm: False, their biases are zero).
        pos_embed_interp: absolute position embeddings for other grids: ``'dinov2'`` (original/DepthAnythingV2; the
            default for the short names), ``'timm'`` (the default for timm model names) or ``'hf'`` (``Dinov2Model``).
        rope_periods: DINOv3 RoPE periods: ``'checkpoint'`` (default) takes them from a checkpoint that holds them
            (official files store them rounded to bf16, as the official model computes) and saves them in the state
            dict (``rope.periods``); ``'computed'`` uses the fp32 values computed from the base, as timm and HF do.
    """

    def __init__(
            self,
            model_name: str = 'dinov3_vitb16',
            arch: Optional[str] = None,
            checkpoint: Optional[Union[str, Path]] = None,
            inherit: str = 'all',
            out_indices: Optional[Sequence[int]] = None,
            frozen: bool = False,
            drop_path_rate: float = 0.,
            embed_dim: Optional[int] = None,
            depth: Optional[int] = None,
            num_heads: Optional[int] = None,
            qkv_bias: Optional[bool] = None,
            pos_embed_interp: Optional[str] = None,
            rope_periods: str = 'checkpoint',
            mixers: Optional[Dict[str, Dict[str, Any]]] = None,
            grad_checkpointing: bool = False,
            **unknown: Any,
    ) -> None:
        super().__init__()
        refuse_unknown_arguments(self, unknown, mixers)
        if inherit not in INHERIT:
            raise ValueError(f'unknown inherit {inherit!r}; valid: {", ".join(INHERIT)}')
        if rope_periods not in ROPE_PERIODS:
            raise ValueError(f'unknown rope_periods {rope_periods!r}; valid: {", ".join(ROPE_PERIODS)}')
        if pos_embed_interp is not None and pos_embed_interp not in POS_EMBED_INTERP:
            raise ValueError(f'unknown pos_embed_interp {pos_embed_interp!r}; valid: {", ".join(POS_EMBED_INTERP)}')
        table = MixerTable.from_args(mixers)
        overrides = {k: v for k, v in dict(embed_dim=embed_dim, depth=depth, num_heads=num_heads,
                                            qkv_bias=qkv_bias).items() if v is not None}
        teacher, variant = create_teacher(model_name, drop_path_rate, **overrides)
        self.build_args = dict(model_name=model_name, out_indices=out_indices, drop_path_rate=drop_path_rate,
                               embed_dim=embed_dim, depth=depth, num_heads=num_heads, qkv_bias=qkv_bias,
                               pos_embed_interp=pos_embed_interp, rope_periods=rope_periods, mixers=mixers)
        self.model_name = model_name
        self.family = variant.family if variant is not None else type(teacher).__name__
        self.embed_dim = teacher.embed_dim
        self.depth = len(teacher.blocks)
        self.num_heads = teacher.blocks[0].attn.num_heads
        self.patch_size = int(teacher.patch_embed.patch_size[0])
        self.num_prefix_tokens = teacher.num_prefix_tokens
        self.mixer_table = table
        self.arch = validate_arch(arch if arch is not None else 'F' * self.depth, self.depth, table.letters)
        self.inherit = inherit
        # an alias keeps the original DINOv2 / DepthAnythingV2 convention; a timm name computes as its timm model
        self.pos_embed_interp = pos_embed_interp or ('dinov2' if variant is not None else 'timm')
        self.frozen = frozen
        self.grad_checkpointing = bool(grad_checkpointing)
        self.out_indices = self._normalise_indices(
            out_indices if out_indices is not None
            else variant.out_indices_for(self.depth) if variant is not None else (self.depth - 1,))

        self.patch_embed = teacher.patch_embed
        self.cls_token = teacher.cls_token
        self.reg_token = getattr(teacher, 'reg_token', None)
        self.pos_embed = teacher.pos_embed
        # position embeddings of the prefix tokens too, or of the patches only (timm's no_embed_class)
        self.pos_embed_prefix = 0 if getattr(teacher, 'no_embed_class', False) else self.num_prefix_tokens
        self.norm_pre = getattr(teacher, 'norm_pre', nn.Identity())
        self.rope = getattr(teacher, 'rope', None)
        self.rope_periods = rope_periods
        if self.rope is not None and rope_periods == 'checkpoint':  # timm keeps them out of the state dict
            self.rope._non_persistent_buffers_set.discard('periods')
        self.register_load_state_dict_post_hook(_drop_rope_cache)
        _drop_rope_cache(self)
        teacher_attn = teacher.blocks[0].attn
        self.qkv_bias = teacher_qkv(teacher_attn)[1] is not None
        rotate_half = (variant.family == 'dinov3' if variant is not None
                       else bool(getattr(teacher_attn, 'rotate_half', False)))
        mixer_args = dict(dim=self.embed_dim, num_heads=self.num_heads, qkv_bias=self.qkv_bias,
                          proj_bias=teacher_attn.proj.bias is not None, num_prefix_tokens=self.num_prefix_tokens,
                          rotate_half=rotate_half, attn_drop=0., proj_drop=0.)
        table.check(mixer_args, rope_dim=self.embed_dim // self.num_heads if self.rope is not None else None)
        blocks = []
        for letter, block in zip(self.arch, teacher.blocks):
            mixer = table.build(letter, **mixer_args)
            _copy_teacher_attention(mixer, block.attn)
            blocks.append(JetBlock(block.norm1, mixer, layer_scale(block, 1), block.drop_path1,
                                   block.norm2, block.mlp, layer_scale(block, 2), block.drop_path2))
        self.blocks = nn.ModuleList(blocks)
        self.norm = teacher.norm
        self.mixer_args = mixer_args

        if checkpoint is not None:
            self.load_checkpoint(checkpoint)
        if inherit == 'mlp':
            self.reset_efficient_mixers()
        if frozen:
            self.requires_grad_(False)
            self.eval()

    # ------------------------------------------------------------------ helpers
    def _normalise_indices(self, indices: Union[int, Sequence[int]]) -> Tuple[int, ...]:
        if isinstance(indices, int) and not isinstance(indices, bool):
            indices = (indices,)  # as mmseg's VisionTransformer: one layer
        if isinstance(indices, (str, bytes)) or not isinstance(indices, Sequence) or not indices:
            raise ValueError(f'out_indices must be a layer index or a non-empty sequence of them, got {indices!r}')
        out = []
        for i in indices:
            if not isinstance(i, int) or isinstance(i, bool):
                raise ValueError(f'out_indices entries must be ints (layer indices), got {i!r} in {indices!r}')
            j = i + self.depth if i < 0 else i
            if not 0 <= j < self.depth:
                raise ValueError(f'out index {i} out of range for a {self.depth}-layer model')
            out.append(j)
        return tuple(out)

    def new_parameter_names(self) -> List[str]:
        """Parameters a teacher checkpoint does not have: the L mixers' conv / kernel generator, and every parameter
        of a mixer that inherits nothing (``inherits = 'none'``, whatever its names)."""
        names = []
        for name, _ in self.named_parameters():
            parts = name.split('.')
            if parts[0] != 'blocks' or parts[2] != 'attn':
                continue
            supernet = parts[3] == 'candidates'  # supernet: attn.candidates.<letter>.*
            rest = parts[5:] if supernet else parts[3:]
            mixer = self.get_submodule('.'.join(parts[:5] if supernet else parts[:3]))
            if '.'.join(rest) not in TEACHER_ATTN_PARAMS or getattr(mixer, 'inherits', 'qkv_proj') == 'none':
                names.append(name)
        return names

    def _drop_teacher_attention_of_own_init_mixers(self, state: Dict[str, torch.Tensor]) -> None:
        """A teacher's q/k/v/o for a layer whose mixer inherits nothing: not loaded, the mixer keeps its own init
        (the contract's ``inherits = 'none'``; the keys are the teacher's if the layer holds no other key)."""
        for i, block in enumerate(self.blocks):
            if getattr(block.attn, 'inherits', 'qkv_proj') != 'none':
                continue
            prefix = f'blocks.{i}.attn.'
            keys = [k for k in state if k.startswith(prefix)]
            if all(k[len(prefix):] in TEACHER_ATTN_PARAMS for k in keys):
                for key in keys:
                    del state[key]

    def reset_efficient_mixers(self) -> None:
        """Re-initialise q/k/v/o of every non-F layer (``inherit='mlp'``): trunc-normal(0.02) weights, zero biases."""
        for letter, block in zip(self.arch, self.blocks):
            if letter == 'F' or getattr(block.attn, 'inherits', 'qkv_proj') != 'qkv_proj':
                continue
            for layer in (block.attn.qkv, block.attn.proj):
                nn.init.trunc_normal_(layer.weight, std=.02)
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)

    def _apply(self, fn, *args, **kwargs):
        # timm's RoPE recomputes its periods (and drops them from the state dict) when a cast lowers their dtype;
        # keep the loaded values, in fp32
        periods = self.rope.periods.detach().clone() if getattr(self.rope, 'periods', None) is not None else None
        out = super()._apply(fn, *args, **kwargs)
        persistent = self.rope_periods == 'checkpoint'
        if periods is not None and (not torch.equal(self.rope.periods.cpu(), periods.float().cpu())
                                    or persistent == ('periods' in self.rope._non_persistent_buffers_set)):
            self.rope.register_buffer('periods', periods.to(self.rope.periods.device, torch.float32),
                                      persistent=persistent)
        return out

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """Per-block activation checkpointing on or off (as timm's method of that name)."""
        self.grad_checkpointing = bool(enable)

    def run_block(self, block: nn.Module, x: torch.Tensor, grid: Tuple[int, int],
                  rope: Optional[torch.Tensor]) -> torch.Tensor:
        """One block, checkpointed when ``grad_checkpointing`` is on and gradients are being recorded."""
        if self.grad_checkpointing and torch.is_grad_enabled():
            return activation_checkpoint(block, x, grid, rope, use_reentrant=False)
        return block(x, grid, rope)

    def train(self, mode: bool = True) -> 'JetViT':
        _drop_rope_cache(self)
        return super().train(mode and not self.frozen)

    # ------------------------------------------------------------------ weights
    @property
    def spec(self) -> ArchSpec:
        """What this model computes beyond its weights: model, arch, parameter-free mixer options."""
        return ArchSpec.build(self.model_name, self.build_args, arch=self.arch)

    def extra_repr(self) -> str:
        return f'{self.model_name}, embed_dim={self.embed_dim}, depth={self.depth}, num_heads={self.num_heads}'

    def get_extra_state(self) -> torch.Tensor:
        """The arch spec, saved in every state dict (key ``_extra_state``) so that every load can check it."""
        return self.spec.to_tensor()

    def set_extra_state(self, state: torch.Tensor) -> None:
        """Called by ``load_state_dict`` (also mmengine's and mmseg's loaders): refuse weights of another spec."""
        check_spec(ArchSpec.from_tensor(state, 'the loaded state dict'), self.spec, 'the loaded state dict')

    def load_checkpoint(self, path: Union[str, Path], prefix: Optional[str] = None) -> str:
        """Load teacher or JetViT weights from ``path`` (of a runner checkpoint, its ``student.`` / ``backbone.``
        part) strictly (:func:`~jetvit_mm.models.checkpoint.apply_checkpoint`); returns the detected format.
        ``prefix`` (as mmengine's ``init_cfg=dict(type='Pretrained', prefix=...)``): only the weights under it."""
        checkpoint = read(path, prefix)
        apply_checkpoint(self, checkpoint)
        return checkpoint.format

    def load_jetvit_state_dict(self, *args, **kwargs) -> None:
        """Removed on 2026-12-07: refused with the new spelling."""
        raise AttributeError('JetViT.load_jetvit_state_dict was removed: apply weights with '
                             'jetvit_mm.models.checkpoint.apply_checkpoint(model, state_dict) (or read(path))')

    def checkpoint_filter_fn(self, state: Dict[str, torch.Tensor], source: str = 'state dict',
                             saved: Optional[ArchSpec] = None) -> Dict[str, torch.Tensor]:
        """This model's key map (timm's ``checkpoint_filter_fn``): JetViT-named weights saved with the spec ``saved``
        -> the state it loads. All-zero qkv biases are dropped when it has none (a non-zero one is an error), RoPE
        periods when it computes them, and a teacher's q/k/v/o (no spec, or all F) of the layers whose mixer
        inherits nothing. The tensors are ``state``'s own."""
        state = dict(state)
        if not self.qkv_bias:  # timm's DINOv3 S/B/L have no qkv bias; checkpoints may carry all-zero ones
            self._drop_zero_qkv_biases(state, source)
        if self.rope is not None and self.rope_periods == 'computed':
            state.pop('rope.periods', None)
        if saved is None or saved.is_teacher:
            self._drop_teacher_attention_of_own_init_mixers(state)
        return state

    def _drop_zero_qkv_biases(self, state: Dict[str, torch.Tensor], source: str) -> None:
        for key in [k for k in state if re.fullmatch(r'blocks\.(\d+)\.attn\.qkv\.bias', k)]:
            if int(key.split('.')[1]) >= self.depth:
                continue  # a layer this model lacks: reported as unexpected
            if state[key].abs().max() > 0:
                raise ValueError(f'{source}: {key} is non-zero but this model has no qkv bias; '
                                 f'build it with qkv_bias=True')
            del state[key]

    # ------------------------------------------------------------------ forward
    def _grid(self, x: torch.Tensor) -> Tuple[int, int]:
        if x.dim() != 4:
            raise ValueError(f'expected an image batch [B, C, H, W], got shape {tuple(x.shape)}')
        channels = self.patch_embed.proj.in_channels
        if x.shape[1] != channels:
            raise ValueError(f'expected {channels}-channel images [B, {channels}, H, W], got shape {tuple(x.shape)}')
        H, W = x.shape[-2:]
        if x.shape[0] == 0 or H == 0 or W == 0:
            raise ValueError(f'empty input: expected at least one image of at least one patch ({self.patch_size} '
                             f'pixels) per side, got shape {tuple(x.shape)} (an empty batch or an empty image)')
        if H % self.patch_size or W % self.patch_size:
            raise ValueError(f'input size {H}x{W} is not a multiple of the patch size {self.patch_size}; '
                             f'pad or resize it (mmseg: model.data_preprocessor.test_cfg=dict(size_divisor='
                             f'{self.patch_size}) pads test images, data_preprocessor.size the training crops; '
                             f'mmdet: model.data_preprocessor.pad_size_divisor, a multiple of {self.patch_size})')
        return H // self.patch_size, W // self.patch_size

    def prepare_tokens(self, x: torch.Tensor) -> Tuple[torch.Tensor, Tuple[int, int], Optional[torch.Tensor]]:
        """Patch embedding + prefix tokens (+ position embedding); returns tokens, grid and RoPE."""
        check_not_legacy_onnx_export()
        grid = self._grid(x)
        x = self.patch_embed(x).flatten(1, 2)  # NHWC -> [B, h*w, D]
        prefix = [t.expand(x.shape[0], -1, -1) for t in (self.cls_token, self.reg_token) if t is not None]
        if self.pos_embed is not None and not self.pos_embed_prefix:  # timm's no_embed_class: patches only
            x = x + resize_pos_embed(self.pos_embed, grid, 0, self.pos_embed_interp)
        x = torch.cat(prefix + [x], dim=1) if prefix else x
        if self.pos_embed is not None and self.pos_embed_prefix:
            x = x + resize_pos_embed(self.pos_embed, grid, self.pos_embed_prefix, self.pos_embed_interp)
        return self.norm_pre(x), grid, self.rope_embed(grid)

    def rope_embed(self, grid: Tuple[int, int]) -> Optional[torch.Tensor]:
        """DINOv3 RoPE for a patch grid (None without RoPE); outside training cached per grid, device and dtype.

        Built on the RoPE's device (:func:`rope_embed_on_device`: timm's own coordinates would be made on the CPU and
        copied, which CUDA-graph capture refuses inside torch.compile); the cache saves the few small kernels per
        forward. Training (where timm may augment the coordinates) always builds a fresh one.
        """
        if self.rope is None:
            return None
        if exporting():  # a symbolic grid: no cache, coordinates from tensor ops (the same values)
            return rope_embed_for_grid(self.rope, grid)
        if self.training or torch.compiler.is_compiling():
            # in a compiled graph the embed is built in the graph: a cache lookup there would be guarded on, and the
            # graph compiled again once the cache fills
            return rope_embed_on_device(self.rope, grid)
        key = (tuple(grid),) + tuple((b.device, b.dtype) for b in self.rope.buffers())
        cache = self._rope_cache
        if key not in cache:
            if len(cache) >= 8:
                cache.clear()
            with plain_tensors():  # also serves later forwards with autograd on (an eval-mode model being trained)
                cache[key] = rope_embed_on_device(self.rope, grid)
        return cache[key]

    def forward_intermediates(self, x: torch.Tensor, indices: Optional[Sequence[int]] = None, norm: bool = True,
                              output_fmt: str = 'NCHW', return_prefix_tokens: bool = False):
        """Outputs of the layers in ``indices`` (default ``out_indices``), as timm's ``forward_intermediates``.

        ``norm`` applies the final LayerNorm to each; ``output_fmt`` is ``'NCHW'`` or ``'NLC'`` (patch tokens).
        With ``return_prefix_tokens`` each item is ``(map, prefix tokens)``.
        """
        if output_fmt not in ('NCHW', 'NLC'):
            raise ValueError(f'unknown output_fmt {output_fmt!r}; valid: NCHW, NLC')
        take = self._normalise_indices(indices) if indices is not None else self.out_indices
        x, grid, rope = self.prepare_tokens(x)
        outputs = {}
        for i, block in enumerate(self.blocks[:max(take) + 1]):
            x = self.run_block(block, x, grid, rope)
            if i in take:
                y = self.norm(x) if norm else x
                prefix, patches = y[:, :self.num_prefix_tokens], y[:, self.num_prefix_tokens:]
                if output_fmt == 'NCHW':
                    patches = patches.transpose(1, 2).reshape(x.shape[0], -1, *grid)
                outputs[i] = (patches, prefix) if return_prefix_tokens else patches
        return [outputs[i] for i in take]

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """All tokens after the last block and the final norm, ``[B, prefix + h*w, D]``."""
        x, grid, rope = self.prepare_tokens(x)
        for block in self.blocks:
            x = self.run_block(block, x, grid, rope)
        return self.norm(x)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """NCHW maps of ``out_indices`` after the final norm, prefix tokens removed."""
        return tuple(self.forward_intermediates(x))
