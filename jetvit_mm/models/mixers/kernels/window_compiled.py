"""W for torch.compile on the CPU: the torch path's windows, with each window's keys padded to a multiple of 16.

PyTorch's CPU flash attention runs its bf16 matrix units on key blocks that are a multiple of 16 long: a window of
``P + wh * ww`` keys (261 for 16 x 16 windows and 5 prefix tokens) takes it off that path (about 2x slower in bf16
on an AMX Xeon). Padding the keys to 272 and masking the padding computes the same attention (a masked key has
weight exactly 0); under torch.compile the RoPE, windowing and padding of q, k and v fuse into one pass each.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from ..rope import rotate_query_key
from ..window_layout import window_merge, window_partition

KEY_MULTIPLE = 16


def padded_key_mask(batch: int, grid_size: Tuple[int, int], window: Tuple[int, int], num_prefix_tokens: int,
                    keys: int, device: torch.device) -> torch.Tensor:
    """Boolean key mask ``[B * windows or 1, 1, 1, keys]``: prefix and real patches True, padding False."""
    (h, w), (wh, ww) = grid_size, window
    valid = torch.ones(1, 1, h * w, 1, dtype=torch.bool, device=device)
    valid = window_partition(valid, grid_size, window)[:, 0, :, 0]  # [windows, wh * ww], grid padding False
    valid = torch.cat([valid.new_ones(valid.shape[0], num_prefix_tokens), valid], dim=1)
    valid = F.pad(valid, (0, keys - valid.shape[1]), value=False)
    if h % wh == 0 and w % ww == 0:
        return valid[:1, None, None, :]
    return valid.repeat(batch, 1)[:, None, None, :]


def padded_window_attention(
        qkv: torch.Tensor,
        grid_size: Tuple[int, int],
        window: Tuple[int, int],
        num_heads: int,
        num_prefix_tokens: int,
        rope: Optional[torch.Tensor] = None,
        rotate_half: bool = True,
) -> torch.Tensor:
    """What :func:`~jetvit_mm.models.mixers.window.window_attention` computes (inference, no dropout), with padded
    keys: ``[B, N, D]`` before ``proj``."""
    B, N, D3 = qkv.shape
    D, P = D3 // 3, num_prefix_tokens
    q, k, v = qkv.reshape(B, N, 3, num_heads, D // num_heads).permute(2, 0, 3, 1, 4).unbind(0)
    if rope is not None:
        q, k = rotate_query_key(q, k, rope, P, rotate_half)
    out_prefix = F.scaled_dot_product_attention(q[:, :, :P], k, v) if P > 0 else None
    keys = -(-(P + window[0] * window[1]) // KEY_MULTIPLE) * KEY_MULTIPLE
    q_win = window_partition(q[:, :, P:], grid_size, window)
    k_win, v_win = (F.pad(window_partition(t[:, :, P:], grid_size, window, prefix=t[:, :, :P] if P > 0 else None),
                          (0, 0, 0, keys - P - window[0] * window[1])) for t in (k, v))
    mask = padded_key_mask(B, grid_size, window, P, keys, qkv.device)
    out = window_merge(F.scaled_dot_product_attention(q_win, k_win, v_win, attn_mask=mask), B, grid_size, window)
    if out_prefix is not None:
        out = torch.cat([out_prefix.transpose(1, 2).reshape(B, P, D), out], dim=1)
    return out
