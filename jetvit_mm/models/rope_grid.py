"""DINOv3 RoPE embeds built from a patch grid whose sizes may be symbolic (``torch.export``).

timm's ``RotaryEmbeddingDinoV3.get_embed(shape=(h, w))`` divides the patch centres by ``float(h)``, which fixes a
symbolic grid to the size it was traced at. :func:`rope_embed_for_grid` builds the same coordinates with tensor ops
(the grid size comes from a sum of ones, exact in fp32) and hands them to timm's own sin/cos computation: the result
is bit-identical to ``get_embed`` in eval mode, at every grid.
"""
from typing import Tuple

import torch
from torch import nn


def grid_count(n, like: torch.Tensor) -> torch.Tensor:
    """``n`` (an int or a symbolic size) as a 0-d fp32 tensor on ``like``'s device, without specialising it."""
    return torch.ones(n, dtype=torch.float32, device=like.device).sum()


def _centres(n, like: torch.Tensor) -> torch.Tensor:
    """Patch centres normalised to [0, 1] along one side: ``(arange(n) + 0.5) / n``."""
    return (torch.arange(n, dtype=torch.float32, device=like.device) + 0.5) / grid_count(n, like)


def rope_embed_for_grid(rope: nn.Module, grid_size: Tuple[int, int]) -> torch.Tensor:
    """``rope.get_embed(shape=grid_size)`` of a timm ``RotaryEmbeddingDinoV3`` in eval mode, for symbolic sizes.

    Supports the DINOv3 coordinate convention (``normalize_coords='separate'``, ``grid_indexing='ij'``, offset 0,
    no coordinate augmentation); anything else raises ValueError naming the setting.
    """
    settings = dict(normalize_coords=(rope.normalize_coords, 'separate'), grid_indexing=(rope.grid_indexing, 'ij'),
                    grid_offset=(float(rope.grid_offset), 0.))
    other = {k: v for k, (v, want) in settings.items() if v != want}
    if other or (rope.training and rope.aug_active):
        raise ValueError(f'RoPE from a symbolic grid supports the DINOv3 convention only (normalize_coords='
                         f"'separate', grid_indexing='ij', grid_offset=0, eval mode); got {other or 'training'}")
    h, w = grid_size
    periods = rope.periods
    coords = torch.stack(torch.meshgrid(_centres(h, periods), _centres(w, periods), indexing='ij'), dim=-1)
    coords = (2.0 * coords - 1.0).flatten(0, 1)  # [h * w, 2] in [-1, 1], as timm's centred grid
    sin, cos = rope._get_pos_embed_from_coords(coords)
    return torch.cat([sin, cos], dim=-1)



def rope_embed_on_device(rope: nn.Module, grid_size: Tuple[int, int]) -> torch.Tensor:
    """``rope.get_embed(shape=grid_size)`` with every tensor made on the RoPE's own device (that of its periods).

    timm's ``RotaryEmbeddingDinoV3`` makes its coordinates on the CPU and copies them over: a host-to-device copy per
    embed, which CUDA-graph capture refuses inside ``torch.compile``. A DINOv3 RoPE without coordinate augmentation
    (eval mode, or none configured) gets :func:`rope_embed_for_grid`'s coordinates, made on the device (the same
    values). timm's own call serves the rest: augmented coordinates (timm draws them on the CPU), other conventions,
    and timm's other RoPEs (EVA's ``RotaryEmbeddingCat`` builds on its bands' device already).
    """
    dinov3 = (hasattr(rope, 'periods') and hasattr(rope, '_get_pos_embed_from_coords')
              and getattr(rope, 'normalize_coords', None) == 'separate' and getattr(rope, 'grid_indexing', None) == 'ij'
              and float(getattr(rope, 'grid_offset', 0.)) == 0.)
    if not dinov3 or (rope.training and getattr(rope, 'aug_active', False)):
        return rope.get_embed(shape=grid_size)
    return rope_embed_for_grid(rope, grid_size)
