"""Window attention in the forms ``torch.export`` (ONNX) traces: masked full attention for a symbolic patch grid,
windows for a fixed one.

The windowed formulation reshapes tokens by the number of windows, which ``torch.export`` traces only with guards
that fix the grid; the masked form sees the same keys at full attention's cost (docs/deploy.md). At a fixed grid
:func:`fixed_grid_window_attention` keeps the windows, each cut by one transpose, the prefix in front by one concat.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from .rope import check_rope, rope_table, rotate_query_key, rotate_with_table
from .window_layout import window_key_mask


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


def fixed_grid_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grid_size: Tuple[int, int],
                                window: Tuple[int, int], num_heads: int, num_prefix_tokens: int,
                                rope: Optional[torch.Tensor] = None, rotate_half: bool = True) -> torch.Tensor:
    """:func:`~jetvit_mm.models.mixers.window.window_attention`'s values from the projections ``q``, ``k``, ``v``
    (``[B, N, D]`` each, :meth:`~jetvit_mm.models.mixers.base.TokenMixer.projections`) at a static grid, with
    ``window`` already clipped to the grid: heads merged, ``[B, N, D]``."""
    B, N, D = q.shape
    H, C, P = num_heads, D // num_heads, num_prefix_tokens
    (h, w), (wh, ww) = grid_size, window
    nh, nw = -(-h // wh), -(-w // ww)
    q, k, v = (t.reshape(B, N, H, C) for t in (q, k, v))
    if rope is not None:
        check_rope(rope, h * w, C)
        table = rope_table(rope.to(q.dtype), P, rotate_half)[:, None]  # [N, 1, 2 C]: every head
        q, k = rotate_with_table(q, table, rotate_half), rotate_with_table(k, table, rotate_half)

    def windows(t: torch.Tensor) -> torch.Tensor:  # patch tokens [B, N, H, C] -> [B * nh * nw, H, wh * ww, C]
        grid = t[:, P:].reshape(B, h, w, H, C)
        if (nh * wh, nw * ww) != (h, w):
            grid = F.pad(grid, (0, 0, 0, 0, 0, nw * ww - w, 0, nh * wh - h))
        grid = grid.reshape(B, nh, wh, nw, ww, H, C).permute(0, 1, 3, 5, 2, 4, 6)
        return grid.reshape(B * nh * nw, H, wh * ww, C)

    def with_prefix(t: torch.Tensor) -> torch.Tensor:  # the prefix tokens in front of every window
        if P == 0:
            return windows(t)
        prefix = t[:, :P].transpose(1, 2)[:, None].expand(B, nh * nw, H, P, C).reshape(B * nh * nw, H, P, C)
        return torch.cat([prefix, windows(t)], dim=2)

    mask = window_key_mask(B, grid_size, window, P, q.device)
    out = F.scaled_dot_product_attention(windows(q), with_prefix(k), with_prefix(v), attn_mask=mask)
    out = out.reshape(B, nh, nw, H, wh, ww, C).permute(0, 1, 4, 2, 5, 3, 6).reshape(B, nh * wh, nw * ww, D)
    out = out[:, :h, :w].reshape(B, h * w, D)
    if P == 0:
        return out
    q_prefix, k_all, v_all = q[:, :P].transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    out_prefix = F.scaled_dot_product_attention(q_prefix, k_all, v_all).transpose(1, 2).reshape(B, P, D)
    return torch.cat([out_prefix, out], dim=1)
