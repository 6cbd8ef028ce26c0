"""A depthwise-conv token mixer with its own projections: a mixer that inherits nothing from the teacher.

Patch tokens are mixed by a ``kernel_size`` x ``kernel_size`` depthwise conv on the patch grid (ConvNeXt /
MetaFormer-style local mixing), prefix tokens by the mean of the mixed patch tokens; both between its own input and
output projections. It declares ``inherits = 'none'`` (the mixer contract, ``jetvit_mm.models.mixers.base``): a
layer of it takes none of the teacher's attention weights, in a JetViT and in a supernet. Its output projection is
named ``proj`` like the teacher's on purpose: the name does not make it inherit. The output projection starts at
zero, so that a layer of it starts as the identity (its block's residual branch adds nothing) and distillation
moves it from there.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from jetvit_mm.models.mixers import register_mixer
from jetvit_mm.models.mixers.rope import check_num_tokens

__all__ = ['DepthwiseConvMixer', 'depthwise_conv_mixer_reference']


@register_mixer
class DepthwiseConvMixer(nn.Module):
    """Depthwise conv on the patch grid between its own ``proj_in`` and ``proj`` (no attention, no RoPE).

    Args (beyond the mixer contract's common ones; ``num_heads``, ``rotate_half`` and ``attn_drop`` are unused):
        kernel_size: the odd side of the depthwise kernel, in patches (>= 1).
    """

    inherits = 'none'

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True, proj_bias: bool = True,
                 num_prefix_tokens: int = 1, rotate_half: bool = True, attn_drop: float = 0., proj_drop: float = 0.,
                 kernel_size: int = 3) -> None:
        super().__init__()
        if not isinstance(kernel_size, int) or isinstance(kernel_size, bool) or kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f'DepthwiseConvMixer: kernel_size must be an odd int >= 1, got {kernel_size!r}')
        self.num_prefix_tokens = num_prefix_tokens
        self.kernel_size = kernel_size
        self.proj_in = nn.Linear(dim, dim, bias=qkv_bias)
        self.dwconv = nn.Conv2d(dim, dim, kernel_size, padding=kernel_size // 2, groups=dim)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.proj_drop = nn.Dropout(proj_drop)
        nn.init.zeros_(self.proj.weight)
        if self.proj.bias is not None:
            nn.init.zeros_(self.proj.bias)

    def forward(self, x: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor] = None) -> torch.Tensor:
        B, N, D = x.shape
        P = self.num_prefix_tokens
        check_num_tokens(N, P, grid_size)
        h, w = grid_size
        x = self.proj_in(x)
        grid = x[:, P:].transpose(1, 2).reshape(B, D, h, w)
        patches = self.dwconv(grid).flatten(2).transpose(1, 2)  # [B, h * w, D]
        prefix = x[:, :P] + patches.mean(dim=1, keepdim=True)
        return self.proj_drop(self.proj(torch.cat([prefix, patches], dim=1)))


def depthwise_conv_mixer_reference(mixer: DepthwiseConvMixer, x: torch.Tensor,
                                   grid_size: Tuple[int, int]) -> torch.Tensor:
    """The same mixing written token by token in float64: each patch is the sum over its kernel window of the
    kernel-weighted neighbours (zero outside the grid), each prefix token its own value plus the patches' mean."""
    B, N, D = x.shape
    P, (h, w), k = mixer.num_prefix_tokens, grid_size, mixer.kernel_size
    p = {name: t.double() for name, t in mixer.named_parameters()}
    v = F.linear(x.double(), p['proj_in.weight'], p.get('proj_in.bias'))
    kernel = p['dwconv.weight'][:, 0]  # [D, k, k]
    out = torch.zeros(B, N, D, dtype=torch.float64)
    for i in range(h):
        for j in range(w):
            acc = p['dwconv.bias'].expand(B, D).clone()
            for di in range(k):
                for dj in range(k):
                    y, z = i + di - k // 2, j + dj - k // 2
                    if 0 <= y < h and 0 <= z < w:
                        acc += kernel[:, di, dj] * v[:, P + y * w + z]
            out[:, P + i * w + j] = acc
    out[:, :P] = v[:, :P] + out[:, P:].mean(dim=1, keepdim=True)
    return F.linear(out, p['proj.weight'], p.get('proj.bias'))
