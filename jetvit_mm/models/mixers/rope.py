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
        raise ValueError(f'got {num_tokens} tokens, expected num_prefix_tokens + h * w = {num_prefix_tokens} + {h} * '
                         f'{w} = {num_prefix_tokens + h * w} for grid_size={tuple(grid_size)}')


def check_rope(rope: torch.Tensor, num_patches: int, head_dim: int) -> None:
    """Raise ValueError unless ``rope`` ends in ``(num_patches, 2 * head_dim)``."""
    if rope.dim() < 2 or tuple(rope.shape[-2:]) != (num_patches, 2 * head_dim):
        raise ValueError(f'rope must have shape (h * w, 2 * head_dim) = ({num_patches}, {2 * head_dim}) '
                         f'([sin, cos] per patch), got {tuple(rope.shape)}')


def rope_table(rope: torch.Tensor, num_prefix_tokens: int, rotate_half: bool = True) -> torch.Tensor:
    """``rope`` made ready for :func:`apply_rope_table` on all tokens: identity rows (sin 0, cos 1) for the prefix,
    and with ``rotate_half`` the sign of ``[-x2, x1]`` moved into the sin table (both exact). Interleaved pairs keep
    the sign in timm's rotation (``kernels.linear_fused.rotation_table`` folds it for both layouts).
    """
    if num_prefix_tokens:
        identity = torch.cat([rope.new_zeros(num_prefix_tokens, rope.shape[-1] // 2),
                              rope.new_ones(num_prefix_tokens, rope.shape[-1] // 2)], dim=-1)
        rope = torch.cat([identity, rope], dim=0)
    if not rotate_half:
        return rope
    sin, cos = rope.chunk(2, dim=-1)
    sin_a, sin_b = sin.chunk(2, dim=-1)
    return torch.cat([-sin_a, sin_b, cos], dim=-1)


def apply_rope_table(x: torch.Tensor, table: torch.Tensor, rotate_half: bool = True) -> torch.Tensor:
    """RoPE on every token of ``x`` (``[..., N, head_dim]``) with a :func:`rope_table`, in ``x.dtype``: timm's
    ``apply_rot_embed_cat`` on the patch tokens, prefix tokens unchanged."""
    if tuple(table.shape[-2:]) != (x.shape[-2], 2 * x.shape[-1]):
        raise ValueError(f'rope table must have shape (num_tokens, 2 * head_dim) = ({x.shape[-2]}, '
                         f'{2 * x.shape[-1]}), got {tuple(table.shape)}')
    return rotate_with_table(x, table, rotate_half)


def rotate_with_table(x: torch.Tensor, table: torch.Tensor, rotate_half: bool = True) -> torch.Tensor:
    """:func:`apply_rope_table`'s rotation with ``table`` broadcast against ``x`` as it is (no shape check), e.g.
    a ``[N, 1, 2 * head_dim]`` table on token-major ``[B, N, heads, head_dim]``. Always in ``x.dtype``: timm's
    interleaved branch returns the promoted dtype in some versions (1.0.29: fp32 for bf16 ``x`` and an fp32 table)."""
    if not rotate_half:
        return apply_rot_embed_cat(x, table, half=False).to(x.dtype)
    sin, cos = table.chunk(2, dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return (x * cos + torch.cat([x2, x1], dim=-1) * sin).to(x.dtype)


def rotate_query_key(q: torch.Tensor, k: torch.Tensor, rope: torch.Tensor, num_prefix_tokens: int,
                     rotate_half: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """RoPE on the patch tokens of ``q`` and ``k`` (``[B, H, N, head_dim]``) with one :func:`rope_table`; both
    un-rotated inputs stay alive (fine for views of ``qkv``; the L mixer rotates one at a time itself)."""
    check_rope(rope, q.shape[-2] - num_prefix_tokens, q.shape[-1])
    table = rope_table(rope, num_prefix_tokens, rotate_half)
    return apply_rope_table(q, table, rotate_half), apply_rope_table(k, table, rotate_half)
