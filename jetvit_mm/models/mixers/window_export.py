"""Window attention as masked full attention, for a symbolic patch grid (``torch.export`` / ONNX).

The windowed formulation reshapes tokens by the number of windows, which ``torch.export`` can only trace with guards
that fix the grid to the export size. Here every query attends over all tokens with a boolean mask built from the
grid with tensor ops: a patch query sees the prefix tokens and the patches of its own window, a prefix query sees
everything. The softmax runs over the same keys as :func:`~jetvit_mm.models.mixers.window.window_attention`, so the
values are the same (fp32 rounding aside); the cost is full attention's, which is what an exported W layer pays.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from .rope import rotate_query_key


def window_mask(grid_size: Tuple[int, int], window: int, num_prefix_tokens: int, device: torch.device) -> torch.Tensor:
    """``[N, N]`` boolean mask (True = attend) of window attention with ``num_prefix_tokens`` global tokens."""
    h, w = grid_size
    rows = (torch.arange(h, device=device) // window)[:, None].expand(h, w).reshape(-1)
    cols = (torch.arange(w, device=device) // window)[None, :].expand(h, w).reshape(-1)
    same = (rows[:, None] == rows[None, :]) & (cols[:, None] == cols[None, :])  # [h*w, h*w]
    P = num_prefix_tokens
    if P == 0:
        return same
    n = same.shape[0]
    top = torch.ones(P, P + n, dtype=torch.bool, device=device)
    left = torch.ones(n, P, dtype=torch.bool, device=device)
    return torch.cat([top, torch.cat([left, same], dim=1)], dim=0)


def masked_window_attention(qkv: torch.Tensor, grid_size: Tuple[int, int], window: int, num_heads: int,
                            num_prefix_tokens: int, rope: Optional[torch.Tensor] = None,
                            rotate_half: bool = True) -> torch.Tensor:
    """Window attention on ``qkv`` (``[B, N, 3 * D]``) as one masked attention: heads merged, ``[B, N, D]``."""
    B, N, D3 = qkv.shape
    D = D3 // 3
    q, k, v = qkv.reshape(B, N, 3, num_heads, D // num_heads).permute(2, 0, 3, 1, 4).unbind(0)
    if rope is not None:
        q, k = rotate_query_key(q, k, rope, num_prefix_tokens, rotate_half)
    mask = window_mask(grid_size, window, num_prefix_tokens, qkv.device)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.transpose(1, 2).reshape(B, N, D)
