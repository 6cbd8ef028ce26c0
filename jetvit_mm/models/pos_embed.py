"""Absolute position embeddings for any patch grid (DINOv2 / DepthAnythingV2 teachers)."""
import math
from typing import Tuple

import torch
import torch.nn.functional as F

POS_EMBED_INTERP = ('dinov2', 'timm', 'hf')


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
