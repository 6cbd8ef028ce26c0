"""Absolute position embeddings for any patch grid (DINOv2 / DepthAnythingV2 teachers)."""
import math
from typing import Tuple

import torch
import torch.nn.functional as F

from .rope_grid import grid_count
from .tracing import exporting

POS_EMBED_INTERP = ('dinov2', 'timm', 'hf')
CUBIC_A = -0.75  # PyTorch's (and ONNX Resize's cubic_coeff_a) bicubic convolution coefficient


def resize_pos_embed(pos_embed: torch.Tensor, grid_size: Tuple[int, int], num_prefix_tokens: int = 1,
                     mode: str = 'dinov2') -> torch.Tensor:
    """Resize ``pos_embed`` (``[1, prefix + M*M, D]``) to ``grid_size``; returns ``[1, prefix + h*w, D]``.

    ``mode='dinov2'`` follows the original DINOv2 / DepthAnythingV2 code (bicubic with
    ``scale_factor=((h + 0.1) / M, (w + 0.1) / M)``, no antialias, fp32, unchanged at the native
    square grid); ``mode='timm'`` follows timm (bicubic to the exact size, antialias on); ``mode='hf'`` follows
    Hugging Face's ``Dinov2Model`` (bicubic to the exact size, no antialias).
    """
    if mode not in POS_EMBED_INTERP:
        raise ValueError(f'unknown pos_embed_interp {mode!r}; valid: {", ".join(POS_EMBED_INTERP)}')
    h, w = grid_size
    prefix, patches = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    side = math.isqrt(patches.shape[1])
    if side * side != patches.shape[1]:
        raise ValueError(f'pos_embed has {patches.shape[1]} patch positions, not a square grid')
    if exporting() and mode in ('dinov2', 'hf'):
        return _resize_pos_embed_traceable(pos_embed, (h, w), num_prefix_tokens, side, mode)
    if (h, w) == (side, side):
        return pos_embed
    dtype = pos_embed.dtype
    grid = patches.float().reshape(1, side, side, -1).permute(0, 3, 1, 2)
    if mode == 'dinov2':
        grid = F.interpolate(grid, scale_factor=((h + 0.1) / side, (w + 0.1) / side), mode='bicubic',
                             antialias=False)
    else:
        grid = F.interpolate(grid, size=(h, w), mode='bicubic', antialias=mode == 'timm')
    if grid.shape[-2:] != (h, w):
        raise RuntimeError(f'position-embedding interpolation gave {tuple(grid.shape[-2:])}, expected {(h, w)}')
    grid = grid.permute(0, 2, 3, 1).reshape(1, h * w, -1).to(dtype)
    return torch.cat([prefix, grid], dim=1)


def _cubic_near(x: torch.Tensor) -> torch.Tensor:
    return ((CUBIC_A + 2) * x - (CUBIC_A + 3)) * x * x + 1


def _cubic_far(x: torch.Tensor) -> torch.Tensor:
    return ((CUBIC_A * x - 5 * CUBIC_A) * x + 8 * CUBIC_A) * x - 4 * CUBIC_A


def bicubic_matrix(size, side: int, scale: torch.Tensor) -> torch.Tensor:
    """``[size, side]`` weights of PyTorch's bicubic interpolation (no antialias, ``align_corners=False``) along one
    axis, ``scale`` source pixels per output pixel (a 0-d tensor): source ``scale * (i + 0.5) - 0.5``, four taps,
    indices clamped at the borders. ``size`` may be symbolic."""
    dst = torch.arange(size, dtype=torch.float32, device=scale.device)
    src = scale * (dst + 0.5) - 0.5
    base = torch.floor(src)
    t = src - base
    weights = torch.stack([_cubic_far(t + 1), _cubic_near(t), _cubic_near(1 - t), _cubic_far(2 - t)], dim=1)
    taps = (base[:, None] + torch.arange(-1, 3, dtype=torch.float32, device=scale.device)).clamp(0, side - 1)
    columns = torch.arange(side, dtype=torch.float32, device=scale.device)
    return (weights[:, :, None] * (taps[:, :, None] == columns)).sum(dim=1)


def _resize_pos_embed_traceable(pos_embed: torch.Tensor, grid_size: Tuple[int, int], num_prefix_tokens: int,
                                side: int, mode: str) -> torch.Tensor:
    """:func:`resize_pos_embed` for a symbolic grid (``torch.export``): the same bicubic interpolation as separable
    weight matrices built from the grid with tensor ops, the native grid kept as is by selecting identity matrices
    (no branch on the grid). Equal to the eager result within fp32 rounding (~1e-6 relative)."""
    h, w = grid_size
    prefix, patches = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    count_h, count_w = grid_count(h, pos_embed), grid_count(w, pos_embed)
    offset = 0.1 if mode == 'dinov2' else 0.  # dinov2: scale_factor (n + 0.1) / side; hf: the exact size
    matrices = []
    for size, count in ((h, count_h), (w, count_w)):
        cubic = bicubic_matrix(size, side, side / (count + offset))
        identity = (torch.arange(size, device=pos_embed.device)[:, None]
                    == torch.arange(side, device=pos_embed.device)).float()
        matrices.append((cubic, identity))
    native = (count_h == side) & (count_w == side)  # the original code returns pos_embed unchanged there
    weights_h, weights_w = (torch.where(native, identity, cubic) for cubic, identity in matrices)
    dim = patches.shape[-1]
    rows = (weights_h @ patches.float().reshape(side, side * dim)).reshape(-1, side, dim)  # [h, side, D]
    grid = (weights_w @ rows).reshape(1, -1, dim)  # [w, side] @ [h, side, D] -> [h, w, D]
    return torch.cat([prefix, grid.to(pos_embed.dtype)], dim=1)
