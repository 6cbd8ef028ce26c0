"""FLOPs of a JetViT with the attention math counted (mmengine's and torch's counters skip CPU SDPA).

One multiply-accumulate = 2 FLOPs, for matrix products and convolutions only: ``nn.Linear``, ``nn.Conv2d`` and
``nn.ConvTranspose2d`` by forward hooks (a JetViTDepthAnything's DPT head is the part ``head``), each mixer's
attention math analytically from its shapes; elementwise work (biases, norms, activations, softmax, RoPE, residuals,
interpolations) is not counted. Per layer, with N tokens, D width, head_dim d, batch B:

- F: ``4 * B * N**2 * D`` (q k^T and attn v);
- W: ``4 * B * D * (num_windows * t * (P + t) + P * N)``, ``t`` tokens per (padded) window and ``P`` prefix tokens
  (patch queries see their window plus the prefix; prefix queries see everything); padding counted: it is work done;
- L: ``4 * B * N * D * d`` (phi(k)^T v and phi(q) S) ``+ 2 * B * N * D`` (the normaliser phi(q) z), plus the conv on
  V, ``2 * B * D * h * w * k**2`` (its kernel generator's Linears are hooked);

plus ``qkv`` and ``proj`` (``8 * B * N * D**2``) in every mixer and the MLP in every block. The forward runs under
``FakeTensorMode`` (shapes only: the teacher at 1024x2048 in a fraction of a second); ``fake=False`` runs a real one.
"""
import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from jetvit_mm.models.mixers import (
    MIXERS,
    FullAttention,
    LinearAttention,
    SqueezeDynamicConv,
    StaticDepthwiseConv,
    TokenDynamicConv,
    WindowAttention,
)

PARTS = ('patch_embed', 'qkv_proj', 'attention', 'conv', 'mlp', 'other', 'head')
VALUE_CONVS = (StaticDepthwiseConv, SqueezeDynamicConv, TokenDynamicConv)
_LETTERS = {cls: letter for letter, cls in MIXERS.items()}


# ----------------------------------------------------------------------------- closed forms (also used by tests)

def full_attention_flops(batch: int, num_tokens: int, dim: int) -> int:
    """q k^T and attn v over all ``num_tokens`` tokens: ``4 * B * N**2 * D``."""
    return 4 * batch * num_tokens ** 2 * dim


def window_attention_flops(batch: int, grid_size: Tuple[int, int], window_size: int, num_prefix_tokens: int,
                           dim: int) -> int:
    """Window attention as :class:`WindowAttention` runs it: padded windows (a side shorter than the window uses one
    window of that side's length) whose queries see the window plus the prefix, and prefix queries over all tokens."""
    h, w = grid_size
    wh, ww = min(window_size, h), min(window_size, w)
    num_windows = math.ceil(h / wh) * math.ceil(w / ww)
    per_window = wh * ww
    patch_queries = num_windows * per_window * (num_prefix_tokens + per_window)
    prefix_queries = num_prefix_tokens * (num_prefix_tokens + h * w)
    return 4 * batch * dim * (patch_queries + prefix_queries)


def linear_attention_flops(batch: int, num_tokens: int, dim: int, num_heads: int) -> int:
    """phi(k)^T v and phi(q) S (``2 * B * N * D * head_dim`` each) plus the normaliser phi(q) z (``2 * B * N * D``)."""
    head_dim = dim // num_heads
    return 4 * batch * num_tokens * dim * head_dim + 2 * batch * num_tokens * dim


def value_conv_flops(batch: int, dim: int, grid_size: Tuple[int, int], kernel_size: int) -> int:
    """A depthwise ``k x k`` conv (static or dynamic kernels) on the ``h x w`` value grid."""
    h, w = grid_size
    return 2 * batch * dim * h * w * kernel_size ** 2


def linear_layer_flops(rows: int, in_features: int, out_features: int) -> int:
    return 2 * rows * in_features * out_features


def conv2d_flops(conv: nn.Conv2d, output_shape: Sequence[int]) -> int:
    batch, out_channels, out_h, out_w = output_shape
    kh, kw = conv.kernel_size
    return 2 * batch * out_channels * out_h * out_w * (conv.in_channels // conv.groups) * kh * kw


def conv_transpose2d_flops(conv: nn.ConvTranspose2d, input_shape: Sequence[int]) -> int:
    """Every input pixel meets ``out_channels / groups x kh x kw`` weights (the DPT head's up-sampling layers)."""
    batch, in_channels, in_h, in_w = input_shape
    kh, kw = conv.kernel_size
    return 2 * batch * in_channels * in_h * in_w * (conv.out_channels // conv.groups) * kh * kw


# ----------------------------------------------------------------------------- hooks

def _grid_from_call(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[int, int]:
    grid = kwargs['grid_size'] if 'grid_size' in kwargs else args[1]
    return int(grid[0]), int(grid[1])


def _attention_core_flops(module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> int:
    x = args[0] if args else kwargs['x']
    batch, num_tokens, dim = x.shape
    if isinstance(module, FullAttention):
        return full_attention_flops(batch, num_tokens, dim)
    if isinstance(module, WindowAttention):
        return window_attention_flops(batch, _grid_from_call(args, kwargs), module.window_size,
                                      module.num_prefix_tokens, dim)
    return linear_attention_flops(batch, num_tokens, dim, module.num_heads)


def _value_conv_call_flops(module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> int:
    v = args[0] if args else kwargs['v']
    batch, dim, h, w = v.shape
    return value_conv_flops(batch, dim, (h, w), module.kernel_size)


def _part_of(name: str) -> Tuple[Optional[int], str]:
    """(layer index or None, part) of a counted module name such as ``blocks.3.attn.qkv``."""
    parts = name.split('.')
    if parts[0] == 'depth_head':  # JetViTDepthAnything: the DPT head, then its backbone's own names
        return None, 'head'
    if parts[0] == 'backbone':
        parts = parts[1:]
    if parts[0] == 'patch_embed':
        return None, 'patch_embed'
    if parts[0] != 'blocks' or len(parts) < 3 or not parts[1].isdigit():
        return None, 'other'
    index, rest = int(parts[1]), parts[2:]
    if rest[0] == 'mlp':
        return index, 'mlp'
    if rest[0] != 'attn':
        return index, 'other'
    if len(rest) >= 3 and rest[1] == 'candidates':  # supernet: attn.candidates.<letter>.*
        rest = rest[2:]
    if rest[-1] == '<attention>':
        return index, 'attention'
    if 'conv' in rest[1:]:
        return index, 'conv'
    if rest[-1] in ('qkv', 'proj'):
        return index, 'qkv_proj'
    return index, 'other'


def _declared_attention_flops(module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> int:
    """A plugin mixer's ``attention_flops(batch, num_tokens, grid_size)`` for this call."""
    x = args[0] if args else kwargs['x']
    grid = args[1] if len(args) > 1 else kwargs['grid_size']
    return int(module.attention_flops(x.shape[0], x.shape[1], tuple(grid)))


class FlopCounter:
    """Context manager that hooks ``model`` and sums FLOPs of every forward run inside it; ``records`` holds one
    ``(name, flops)`` per counted call (attention math as ``<mixer>.<attention>``)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.records: List[Tuple[str, int]] = []
        self.mixers: Dict[int, str] = {}
        self._handles: List[Any] = []

    def _hook(self, name: str, count: Callable[..., int]) -> Callable[..., None]:
        def hook(module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any], output: Any) -> None:
            self.records.append((name, int(count(module, args, kwargs, output))))
        return hook

    def _mixer_hook(self, name: str, core: Optional[Callable[..., int]] = None) -> Callable[..., None]:
        core = core or _attention_core_flops
        count = self._hook(f'{name}.<attention>', lambda m, a, k, o: core(m, a, k))

        def hook(module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any], output: Any) -> None:
            layer, _ = _part_of(name)
            if layer is not None:
                self.mixers[layer] = _LETTERS.get(type(module), type(module).__name__)
            count(module, args, kwargs, output)
        return hook

    def __enter__(self) -> 'FlopCounter':
        for name, module in self.model.named_modules():
            if isinstance(module, nn.Linear):
                fn = self._hook(name, lambda m, a, k, o: linear_layer_flops(
                    (a[0] if a else k['input']).numel() // m.in_features, m.in_features, m.out_features))
            elif isinstance(module, nn.Conv2d):
                fn = self._hook(name, lambda m, a, k, o: conv2d_flops(m, o.shape))
            elif isinstance(module, nn.ConvTranspose2d):
                fn = self._hook(name, lambda m, a, k, o: conv_transpose2d_flops(m, (a[0] if a else k['input']).shape))
            elif isinstance(module, (FullAttention, WindowAttention, LinearAttention)):
                fn = self._mixer_hook(name)
            elif callable(getattr(module, 'attention_flops', None)):  # a registered mixer's own count (contract 5)
                fn = self._mixer_hook(name, _declared_attention_flops)
            elif isinstance(module, VALUE_CONVS):
                fn = self._hook(f'{name}.<conv>', lambda m, a, k, o: _value_conv_call_flops(m, a, k))
            else:
                continue
            self._handles.append(module.register_forward_hook(fn, with_kwargs=True))
        return self

    def __exit__(self, *exc: Any) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def summary(self) -> Dict[str, Any]:
        """Totals: ``total``, ``by_part``, ``layers`` (one dict per block, with its mixer letter) and ``modules``."""
        by_part = dict.fromkeys(PARTS, 0)
        layers: Dict[int, Dict[str, Any]] = {}
        modules: Dict[str, int] = {}
        for name, flops in self.records:
            modules[name] = modules.get(name, 0) + flops
            layer, part = _part_of(name)
            by_part[part] += flops
            if layer is not None:
                row = layers.setdefault(layer, {'index': layer, 'mixer': self.mixers.get(layer, '?'),
                                                **dict.fromkeys(PARTS[1:-1], 0), 'total': 0})
                row[part] += flops
                row['total'] += flops
        return {'total': sum(by_part.values()), 'by_part': by_part,
                'layers': [layers[i] for i in sorted(layers)], 'modules': modules}


def _fake_mode() -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode  # private, but the documented way to run on shapes only
    return FakeTensorMode(allow_non_fake_inputs=True)


def count_flops(model: nn.Module, input_size: Tuple[int, int], batch_size: int = 1, in_chans: int = 3,
                fake: bool = True) -> Dict[str, Any]:
    """FLOPs of one forward of ``model`` on a ``[batch_size, in_chans, H, W]`` input, attention included: ``total``,
    ``gflops``, ``by_part`` (patch_embed, qkv_proj, attention, conv, mlp, other, head), ``layers`` (per block: mixer
    letter and the same parts), ``modules`` (per counted module) and the input shape."""
    param = next(model.parameters(), None)
    device = param.device if param is not None else torch.device('cpu')
    dtype = param.dtype if param is not None and param.is_floating_point() else torch.float32
    shape = (batch_size, in_chans, int(input_size[0]), int(input_size[1]))
    counter = FlopCounter(model)
    with torch.no_grad(), counter:
        if fake:
            with _fake_mode():
                model(torch.zeros(shape, device=device, dtype=dtype))
        else:
            model(torch.zeros(shape, device=device, dtype=dtype))
    result = counter.summary()
    result.update(gflops=result['total'] / 1e9, input_shape=list(shape))
    return result
