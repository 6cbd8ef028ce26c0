"""Token layout checks and RoPE on patch tokens, shared by the token mixers.

Tokens are ``[num_prefix_tokens prefix tokens, h * w patch tokens row-major]``. ``rope`` is what timm's
``RotaryEmbeddingDinoV3.get_embed(shape=(h, w))`` returns: ``(h * w, 2 * head_dim)``, ``[sin, cos]``
concatenated, one row per patch in row-major order, shared by all heads. Prefix tokens are never rotated.
"""
from typing import Tuple

import torch
from timm.layers import apply_rot_embed_cat


def check_num_tokens(num_tokens: int, num_prefix_tokens: int, grid_size: Tuple[int, int]) -> None:
    """Raise ValueError unless ``num_tokens == num_prefix_tokens + h * w``."""
    h, w = grid_size
    if num_tokens != num_prefix_tokens + h * w:
        raise ValueError(
            f'got {num_tokens} tokens, expected num_prefix_tokens + h * w = {num_prefix_tokens} + {h} * {w} '
            f'= {num_prefix_tokens + h * w} for grid_size={tuple(grid_size)}'
        )


def check_rope(rope: torch.Tensor, num_patches: int, head_dim: int) -> None:
    """Raise ValueError unless ``rope`` ends in ``(num_patches, 2 * head_dim)``."""
    if rope.dim() < 2 or tuple(rope.shape[-2:]) != (num_patches, 2 * head_dim):
        raise ValueError(
            f'rope must have shape (h * w, 2 * head_dim) = ({num_patches}, {2 * head_dim}) '
            f'([sin, cos] per patch), got {tuple(rope.shape)}'
        )


def rotate_patch_tokens(
        x: torch.Tensor,
        rope: torch.Tensor,
        num_prefix_tokens: int,
        rotate_half: bool = True,
) -> torch.Tensor:
    """Apply RoPE to the patch tokens of ``x`` (``[..., N, head_dim]``); prefix tokens pass unchanged.

    Same numerics as timm's ``EvaAttention``: the rotation is computed with ``rope``'s precision and cast back to
    ``x.dtype``.
    """
    check_rope(rope, x.shape[-2] - num_prefix_tokens, x.shape[-1])
    patches = apply_rot_embed_cat(x[..., num_prefix_tokens:, :], rope, half=rotate_half)
    if num_prefix_tokens == 0:
        return patches
    return torch.cat([x[..., :num_prefix_tokens, :], patches], dim=-2)
