"""ReLU linear attention plus a depthwise conv on V: the 'L' mixer (the JetViT block)."""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from ..tracing import exporting
from .base import TokenMixer
from .kernels import (
    AUTO_COMPILE_MIN_ELEMENTS,
    LINEAR_KERNELS,
    check_kernel,
    compiled,
    fused_linear_attention,
    resolve_once,
    rotation_table,
    select_linear_kernel,
    triton_linear_attention,
)
from .kernels.linear_triton_bwd import trainable_triton_linear_attention
from .kernels.selfcheck import checked_path, mixer_probe
from .rope import apply_rope_table, check_num_tokens, check_rope, rope_table
from .squeeze_conv import SqueezeDynamicConv, StaticDepthwiseConv, build_value_conv, squeeze_conv_tokens

PRECISIONS = ('fp32', 'mixed')


def focused_relu(x: torch.Tensor, power: float, eps: float) -> torch.Tensor:
    """FLatten's focused feature map: ``relu(x) + eps`` raised to ``power``, rescaled to keep its norm (the power of
    ``x / max(x)``, so large inputs cannot overflow)."""
    x = F.relu(x) + eps
    norm = x.norm(dim=-1, keepdim=True)
    x = (x / x.amax(dim=-1, keepdim=True)) ** power
    return x * (norm / x.norm(dim=-1, keepdim=True))


class LinearAttention(TokenMixer):
    """Kernelised (ReLU) linear attention, global over all tokens, plus ``conv(V)`` on the patch grid.

    Per head ``o_i = phi(q_i) S / (phi(q_i) z + eps)`` with ``S = sum_j phi(k_j)^T v_j`` and ``z = sum_j phi(k_j)``.
    ``precision='fp32'`` (default) computes all of it in fp32 whatever the input dtype. ``'mixed'`` keeps bf16
    inputs in bf16 and leaves the accumulation of the sums over tokens (``S``, ``z``, the matmuls) to the kernels'
    fp32 accumulators: half the memory traffic of the elementwise work, which dominates this mixer on GPU. fp16
    inputs always take the fp32 path (``phi(q) z`` can exceed fp16's range). Prefix tokens are ordinary tokens.
    With ``rope`` and ``rope_numerator`` the numerator uses RoPE-rotated ``phi`` of the patch tokens and the
    denominator the un-rotated ones (MLLA). The conv term (``conv`` in 'squeeze', 'static', 'token', 'none') is
    added to the patch tokens only, before ``proj``; ``kernel_init='zero'`` (default) starts it at exactly zero,
    ``'trunc_normal'`` with a small random static kernel (see ``squeeze_conv``).

    ``kernel``: a deployment switch (:mod:`~jetvit_mm.models.mixers.kernels.dispatch`); ``'torch'`` is
    :meth:`linear_attention`, the fused paths ignore ``precision``. No attention matrix: ``attn_drop`` must be 0.
    """

    deployment_options = ('precision', 'kernel')  # where bf16 rounds, which implementation runs: the same math
    init_options = ('kernel_init',)  # how the conv starts: trained weights compute the same either way

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True, proj_bias: bool = True,
                 num_prefix_tokens: int = 1, rotate_half: bool = True, attn_drop: float = 0., proj_drop: float = 0.,
                 conv: str = 'squeeze', kernel_size: int = 3, reduction: int = 8, focusing: Optional[float] = None,
                 rope_numerator: bool = True, eps: float = 1e-6, precision: str = 'fp32', kernel_init: str = 'zero',
                 kernel: str = 'auto') -> None:
        super().__init__(dim, num_heads, qkv_bias, proj_bias, num_prefix_tokens, rotate_half, proj_drop)
        if attn_drop != 0.:
            raise ValueError(f'LinearAttention has no attention matrix to drop out: attn_drop must be 0, '
                             f'got {attn_drop}')
        if focusing is not None and focusing <= 0:
            raise ValueError(f'focusing must be a positive power or None, got {focusing}')
        if precision not in PRECISIONS:
            raise ValueError(f'unknown precision {precision!r}; valid: {", ".join(repr(p) for p in PRECISIONS)}')
        self.focusing = focusing
        self.precision = precision
        self.kernel = check_kernel(kernel, LINEAR_KERNELS, 'mixers.L.kernel')
        self.rope_numerator = rope_numerator
        self.eps = eps
        self.conv = build_value_conv(conv, dim, kernel_size, reduction, kernel_init)
        self._kernel_paths = {}  # (kernel, device, qkv dtype, grad enabled, large input) -> path: kernel_path

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """phi: ReLU, or FLatten's focused ReLU when ``focusing`` is set."""
        if self.focusing is None:
            return F.relu(x)
        return focused_relu(x, self.focusing, self.eps)

    def compute_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The dtype the attention core runs in for inputs of ``dtype``."""
        if self.precision == 'mixed' and dtype in (torch.bfloat16, torch.float32):
            return dtype
        return torch.float32

    def linear_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         rope: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Normalised linear attention on ``[B, H, N, head_dim]`` tensors (autocast off), in :meth:`compute_dtype`."""
        dtype = self.compute_dtype(q.dtype)
        # the meta device has no autocast state of its own (a model built there to count its parameters)
        with torch.autocast(device_type='cpu' if q.device.type == 'meta' else q.device.type, enabled=False):
            q, k, v = self.feature_map(q.to(dtype)), self.feature_map(k.to(dtype)), v.to(dtype)
            denominator = q @ k.sum(dim=2, keepdim=True).transpose(-2, -1)  # [B, H, N, 1]
            if rope is not None and self.rope_numerator:
                check_rope(rope, q.shape[-2] - self.num_prefix_tokens, q.shape[-1])
                table = rope_table(rope.to(dtype), self.num_prefix_tokens, self.rotate_half)
                q = apply_rope_table(q, table, self.rotate_half)  # one at a time: phi(q) is freed before k
                k = apply_rope_table(k, table, self.rotate_half)
            numerator = q @ (k.transpose(-2, -1) @ v)  # [B, H, N, head_dim]
            return numerator / (denominator + self.eps)

    def forward(self, x: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Mix ``x`` (``[B, N, D]``); ``rope`` is ``(h * w, 2 * head_dim)`` or None."""
        B, N, D = x.shape
        P = self.num_prefix_tokens
        check_num_tokens(N, P, grid_size)
        if exporting():  # torch.export / ONNX: the torch path's values in the operations a graph runtime runs fastest
            return self.proj_drop(self.proj(self.exported_attend(x, grid_size, rope)))
        qkv_flat = self.qkv(x)
        path = self.kernel_path(x, qkv_flat.dtype, grid_size, rope)
        return self.proj_drop(self.proj(self.attend(qkv_flat, grid_size, rope, path, x.dtype)))

    def kernel_path(self, x: torch.Tensor, dtype: torch.dtype, grid_size: Tuple[int, int],
                    rope: Optional[torch.Tensor]) -> str:
        """The path :meth:`attend` takes for input ``x`` whose qkv has ``dtype`` (bf16 under autocast): chosen once
        per kernel option, device, dtype and grad mode (no look at the parameters), then held to the self-check's
        verdicts for ``dtype`` (forward, and backward with grad)."""
        grad = torch.is_grad_enabled()
        key = (self.kernel, x.device, dtype, grad, x.numel() >= AUTO_COMPILE_MIN_ELEMENTS)
        path = resolve_once(self._kernel_paths, key, lambda: select_linear_kernel(
            self.kernel, x.device, x.numel(), grad, trainable_triton=self.focusing is None))
        return checked_path(path, x.device, dtype, grad, lambda: mixer_probe(
            self, lambda *args: self.attend(*args, x.dtype), path, x, grid_size, rope, grad))

    def attend(self, qkv_flat: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor],
               path: str, dtype: torch.dtype) -> torch.Tensor:
        """Linear attention plus the conv term of ``qkv_flat`` (``[B, N, 3 * D]``) on ``path``, before ``proj``:
        ``[B, N, D]`` in ``dtype`` (the mixer input's)."""
        B, N, D3 = qkv_flat.shape
        P = self.num_prefix_tokens
        qkv = qkv_flat.reshape(B, N, 3, self.num_heads, self.head_dim)
        if path == 'torch':
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            out = self.linear_attention(q, k, v, rope).transpose(1, 2).reshape(B, N, D3 // 3).to(dtype)
            if self.conv is not None:  # out: a fresh tensor no autograd node saved
                out[:, P:] += self.value_conv(qkv_flat[..., 2 * (D3 // 3):], grid_size)
            return out
        table = None
        if rope is not None and self.rope_numerator:
            check_rope(rope, N - P, self.head_dim)
            # the Triton kernels read a bf16 table for bf16 inputs (half the bytes; the backward rotates with it too)
            bf16 = path == 'triton' and qkv_flat.dtype == torch.bfloat16
            table = rotation_table(rope, P, self.rotate_half, torch.bfloat16 if bf16 else torch.float32)
        # with grad: the trainable Triton kernels (their own backward, the static or squeeze conv term included)
        trains = path == 'triton' and torch.is_grad_enabled() and self.focusing is None
        weights = self.kernel_conv_weights() if path == 'triton' else None
        conv = self.fast_value_conv(qkv_flat, grid_size, path) if self.conv is not None and weights is None else None
        args = (qkv_flat, table, conv, self.num_heads, P, self.eps, self.focusing, self.rotate_half)
        if trains:
            out = trainable_triton_linear_attention(*args[:6], self.rotate_half, weights, tuple(grid_size))
        elif path == 'triton':
            out = triton_linear_attention(*args, conv_weights=weights, grid_size=tuple(grid_size))
        elif path == 'compile':
            out = compiled(fused_linear_attention, qkv_flat.shape)(*args)
        else:  # 'fused': traced by a surrounding torch.compile
            out = fused_linear_attention(*args)
        return out.to(dtype)

    def exported_attend(self, x: torch.Tensor, grid_size: Tuple[int, int],
                        rope: Optional[torch.Tensor]) -> torch.Tensor:
        """What :meth:`attend` computes on the torch path, before ``proj``, from the mixer input ``x``, in the form the
        export traces: q, k, v from :meth:`projections` (no ``[B, N, 3 D]`` split), the conv term padded and added
        (not scattered into a copy of the output)."""
        B, N, D = x.shape
        h, w = grid_size
        P, H, C = self.num_prefix_tokens, self.num_heads, self.head_dim
        q, k, v = self.projections(x)
        q, k, v_heads = (t.reshape(B, N, H, C).transpose(1, 2) for t in (q, k, v))
        out = self.linear_attention(q, k, v_heads, rope).transpose(1, 2).reshape(B, N, D).to(x.dtype)
        if self.conv is None:
            return out
        return out + F.pad(self.value_conv(v, grid_size).to(x.dtype), (0, 0, P, 0))

    def kernel_conv_weights(self) -> Optional[tuple]:
        """The conv term's weights for the Triton kernels to compute it themselves (``('static', weight)`` or
        ``('squeeze', fc1, fc2, fc2 bias)``); None for the token-dynamic conv (computed beforehand) and no conv."""
        if isinstance(self.conv, SqueezeDynamicConv):
            return ('squeeze', self.conv.fc1.weight, self.conv.fc2.weight, self.conv.fc2.bias)
        if isinstance(self.conv, StaticDepthwiseConv):
            return ('static', self.conv.weight)
        return None

    def fast_value_conv(self, qkv_flat: torch.Tensor, grid_size: Tuple[int, int], path: str) -> torch.Tensor:
        """The conv term for the fast paths: the squeeze conv as one pure function (compiled with ``'compile'``,
        traced by the outer compile with ``'fused'``), every other conv as :meth:`value_conv` (the Triton kernels
        compute the static and squeeze convs themselves: :meth:`kernel_conv_weights`)."""
        D = qkv_flat.shape[-1] // 3
        if isinstance(self.conv, SqueezeDynamicConv) and path in ('compile', 'fused'):
            args = (qkv_flat[:, self.num_prefix_tokens:, 2 * D:], grid_size, self.conv.fc1.weight,
                    self.conv.fc2.weight, self.conv.fc2.bias)
            return compiled(squeeze_conv_tokens, qkv_flat.shape)(*args) if path == 'compile' else \
                squeeze_conv_tokens(*args)
        return self.value_conv(qkv_flat[..., 2 * D:], grid_size)

    def value_conv(self, v: torch.Tensor, grid_size: Tuple[int, int]) -> torch.Tensor:
        """The conv term of the patch tokens, ``[B, h * w, D]``, from the values ``v`` of all tokens (``[B, N, D]``,
        any strides, e.g. a view of the qkv output)."""
        B, _, D = v.shape
        h, w = grid_size
        v_grid = v[:, self.num_prefix_tokens:].reshape(B, h, w, D).permute(0, 3, 1, 2)
        return self.conv(v_grid).flatten(2).transpose(1, 2)
