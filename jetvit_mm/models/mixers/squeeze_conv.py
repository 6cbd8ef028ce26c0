"""Depthwise convolutions on the value grid for the linear mixer: static, squeeze-dynamic and token-dynamic.

Every variant maps ``v`` of shape ``[B, D, h, w]`` to ``[B, D, h, w]`` with one ``k x k`` kernel per channel, zero
padding and no bias (a conv bias would shift only the patch tokens, and the dynamic variants generate kernels only).

Init (``kernel_init``, docs/method.md): the static kernel starts at zero (``'trunc_normal'``: std 0.02), so the conv
branch adds nothing at step 0; the dynamic variants hold it in the bias of their generator's last Linear, whose
weight is zero, so at init they equal the static conv exactly.
"""
import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from torch import nn

from ..tracing import exporting, exporting_symbolic_grid

STATIC_KERNEL_STD = 0.02
CONV_VARIANTS = ('squeeze', 'static', 'token', 'none')
KERNEL_INITS = ('zero', 'trunc_normal')


def _check_kernel_init(kernel_init: str) -> None:
    if kernel_init not in KERNEL_INITS:
        raise ValueError(f'unknown kernel_init {kernel_init!r}; valid: {", ".join(repr(k) for k in KERNEL_INITS)}')


def _init_static_kernel(tensor: torch.Tensor, kernel_init: str) -> None:
    if kernel_init == 'zero':
        nn.init.zeros_(tensor)
    else:
        trunc_normal_(tensor, std=STATIC_KERNEL_STD)


def _check_kernel_size(kernel_size: int) -> None:
    if kernel_size < 1 or kernel_size % 2 == 0:
        raise ValueError(f'kernel_size must be odd and >= 1 (same-size output), got {kernel_size}')


class StaticDepthwiseConv(nn.Module):
    """Depthwise ``k x k`` conv on the value grid, one learned kernel per channel ('static')."""

    def __init__(self, dim: int, kernel_size: int = 3, kernel_init: str = 'zero') -> None:
        super().__init__()
        _check_kernel_size(kernel_size)
        _check_kernel_init(kernel_init)
        self.kernel_size, self.kernel_init = kernel_size, kernel_init
        self.weight = nn.Parameter(torch.empty(dim, 1, kernel_size, kernel_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _init_static_kernel(self.weight, self.kernel_init)

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        return F.conv2d(v, self.weight, padding=self.kernel_size // 2, groups=v.shape[1])


class _KernelGenerator(nn.Module):
    """Linear(D, D / r, no bias) -> SiLU -> Linear(D / r, D * k * k); last weight zero, last bias = static kernel."""

    def __init__(self, dim: int, kernel_size: int, reduction: int, kernel_init: str = 'zero') -> None:
        super().__init__()
        if reduction < 1:
            raise ValueError(f'reduction must be >= 1, got {reduction}')
        _check_kernel_init(kernel_init)
        self.kernel_init = kernel_init
        hidden = max(1, dim // reduction)
        self.fc1 = nn.Linear(dim, hidden, bias=False)
        self.act = nn.SiLU()
        self.fc2 = nn.Linear(hidden, dim * kernel_size * kernel_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        trunc_normal_(self.fc1.weight, std=STATIC_KERNEL_STD)
        nn.init.zeros_(self.fc2.weight)
        _init_static_kernel(self.fc2.bias, self.kernel_init)

    def forward(self, g: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(g)))


class SqueezeDynamicConv(_KernelGenerator):
    """Squeeze Dynamic Convolution: one depthwise kernel per image and channel, generated from the mean of V."""

    def __init__(self, dim: int, kernel_size: int = 3, reduction: int = 8, kernel_init: str = 'zero') -> None:
        _check_kernel_size(kernel_size)
        super().__init__(dim, kernel_size, reduction, kernel_init)
        self.kernel_size = kernel_size

    def static_kernel(self) -> torch.Tensor:
        """The kernel used at init, ``[D, 1, k, k]`` (a view of the last generator bias)."""
        k = self.kernel_size
        return self.fc2.bias.view(-1, 1, k, k)

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        B, D = v.shape[:2]
        k = self.kernel_size
        kernels = super().forward(v.mean(dim=(2, 3)))  # [B, D * k * k]
        return depthwise_per_image(v, kernels.reshape(B, D, k, k))


def depthwise_per_image(v: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """Depthwise conv of each image of ``v`` (``[B, D, h, w]``) with its own kernels (``[B, D, k, k]``, zero
    padding, same size)."""
    B, D, h, w = v.shape
    k = kernels.shape[-1]
    if exporting_symbolic_grid():  # a grouped conv with groups = B * D cannot have a symbolic batch
        return per_image_depthwise_conv(v, kernels)
    if exporting():  # one input shape (ONNX at a fixed size): one grouped conv, in the layout ONNX tensors have
        out = F.conv2d(v.reshape(1, B * D, h, w), kernels.reshape(B * D, 1, k, k), padding=k // 2, groups=B * D)
        return out.reshape(B, D, h, w)
    # images side by side as channels of one image, in channels-last layout: a view (no copy) when B == 1 and v
    # comes from tokens, and the layout the fast depthwise kernels take (NCHW here is ~20x slower on CPU)
    v = v.permute(2, 3, 0, 1).reshape(1, h, w, B * D).permute(0, 3, 1, 2)
    out = F.conv2d(v, kernels.reshape(B * D, 1, k, k), padding=k // 2, groups=B * D)
    return out.permute(0, 2, 3, 1).reshape(h, w, B, D).permute(2, 3, 0, 1)


def squeeze_conv_tokens(v: torch.Tensor, grid_size: Tuple[int, int], fc1_weight: torch.Tensor,
                        fc2_weight: torch.Tensor, fc2_bias: torch.Tensor) -> torch.Tensor:
    """:class:`SqueezeDynamicConv` of the patch tokens' values ``v`` (``[B, h * w, D]``, any strides) as one pure
    function of its weights, which the L mixer's fast paths compile (the mean over the tokens one vectorised pass)."""
    B, _, D = v.shape
    h, w = grid_size
    k = math.isqrt(fc2_bias.numel() // D)
    kernels = F.linear(F.silu(F.linear(v.mean(dim=1), fc1_weight)), fc2_weight, fc2_bias)  # [B, D * k * k]
    grid = v.reshape(B, h, w, D).permute(0, 3, 1, 2)
    return depthwise_per_image(grid, kernels.reshape(B, D, k, k)).flatten(2).transpose(1, 2)


def per_image_depthwise_conv(v: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """:func:`depthwise_per_image` as a sum of ``k * k`` shifted products (no grouped conv whose group count depends
    on the batch), so batch and grid may be symbolic (``torch.export``, ONNX)."""
    B, D, h, w = v.shape
    k = kernels.shape[-1]
    padded = F.pad(v, (k // 2,) * 4)
    out = None
    for i in range(k):
        for j in range(k):
            term = padded[:, :, i:i + h, j:j + w] * kernels[:, :, i, j, None, None]
            out = term if out is None else out + term
    return out


class TokenDynamicConv(_KernelGenerator):
    """Token-wise dynamic conv: a depthwise kernel per token from that token's V (slow by design, for Table 1)."""

    def __init__(self, dim: int, kernel_size: int = 3, reduction: int = 8, kernel_init: str = 'zero') -> None:
        _check_kernel_size(kernel_size)
        super().__init__(dim, kernel_size, reduction, kernel_init)
        self.kernel_size = kernel_size

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        B, D, h, w = v.shape
        kk = self.kernel_size ** 2
        kernels = super().forward(v.flatten(2).transpose(1, 2))  # [B, h * w, D * k * k]
        kernels = kernels.reshape(B, h * w, D, kk).permute(0, 2, 3, 1)  # [B, D, k * k, h * w]
        patches = F.unfold(v, self.kernel_size, padding=self.kernel_size // 2).reshape(B, D, kk, h * w)
        return (patches * kernels).sum(dim=2).reshape(B, D, h, w)


def build_value_conv(conv: str, dim: int, kernel_size: int = 3, reduction: int = 8,
                     kernel_init: str = 'zero') -> Optional[nn.Module]:
    """The conv-on-V module for ``conv`` in ``CONV_VARIANTS``; None for ``'none'``."""
    _check_kernel_init(kernel_init)
    if conv == 'squeeze':
        return SqueezeDynamicConv(dim, kernel_size, reduction, kernel_init)
    if conv == 'static':
        return StaticDepthwiseConv(dim, kernel_size, kernel_init)
    if conv == 'token':
        return TokenDynamicConv(dim, kernel_size, reduction, kernel_init)
    if conv == 'none':
        return None
    raise ValueError(f'unknown conv {conv!r}; valid: {", ".join(repr(c) for c in CONV_VARIANTS)}')
