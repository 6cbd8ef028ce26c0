"""W with FlexAttention: patch tokens in window-major order, one window per block pair, prefix tokens last.

The RoPE pass writes q and k straight into window-major order (one fused kernel under torch.compile, the pass F
makes too); v is gathered in the same kernel. Each window (its ``wh * ww`` patches, padded to a multiple of
FlexAttention's 128-token block) attends to itself and to the prefix keys, and prefix queries to every real token,
so the block mask skips all other blocks: the work is the window attention's, not a masked full attention's.
"""
import functools
from typing import Optional, Tuple

import torch

from ..rope import rotate_query_key

BLOCK = 128  # FlexAttention's default sparse block


def _layout(grid_size: Tuple[int, int], window: Tuple[int, int]) -> Tuple[int, int, int]:
    """(windows down, windows across, token slots per window: the window's patches rounded up to a block)."""
    (h, w), (wh, ww) = grid_size, window
    return -(-h // wh), -(-w // ww), -(-wh * ww // BLOCK) * BLOCK


def window_major(x: torch.Tensor, grid_size: Tuple[int, int], window: Tuple[int, int],
                 num_prefix_tokens: int) -> torch.Tensor:
    """``[B, H, P + h * w, C]`` -> ``[B, H, windows * slots + P, C]``: windows in order, zero-padded, prefix last."""
    B, H, _, C = x.shape
    (h, w), (wh, ww) = grid_size, window
    nh, nw, slots = _layout(grid_size, window)
    grid = x[:, :, num_prefix_tokens:].reshape(B, H, h, w, C)
    grid = torch.nn.functional.pad(grid, (0, 0, 0, nw * ww - w, 0, nh * wh - h))
    windows = grid.reshape(B, H, nh, wh, nw, ww, C).permute(0, 1, 2, 4, 3, 5, 6).reshape(B, H, nh * nw, wh * ww, C)
    out = x.new_zeros(B, H, nh * nw * slots + num_prefix_tokens, C)  # one 4-D buffer, as FlexAttention takes it
    out[:, :, :nh * nw * slots].view(B, H, nh * nw, slots, C)[:, :, :, :wh * ww] = windows
    out[:, :, nh * nw * slots:] = x[:, :, :num_prefix_tokens]
    return out


def row_major(x: torch.Tensor, grid_size: Tuple[int, int], window: Tuple[int, int],
              num_prefix_tokens: int) -> torch.Tensor:
    """Inverse of :func:`window_major` with heads merged: ``[B, P + h * w, H * C]``."""
    B, H, _, C = x.shape
    (h, w), (wh, ww) = grid_size, window
    nh, nw, slots = _layout(grid_size, window)
    windows = x[:, :, :nh * nw * slots].reshape(B, H, nh, nw, slots, C)[:, :, :, :, :wh * ww]
    grid = windows.reshape(B, H, nh, nw, wh, ww, C).permute(0, 2, 4, 3, 5, 1, 6).reshape(B, nh * wh, nw * ww, H * C)
    patches = grid[:, :h, :w].reshape(B, h * w, H * C)
    prefix = x[:, :, nh * nw * slots:].transpose(1, 2).reshape(B, num_prefix_tokens, H * C)
    return torch.cat([prefix, patches], dim=1)


def window_mask_mod(grid_size: Tuple[int, int], window: Tuple[int, int]):
    """FlexAttention ``mask_mod`` of the window-major layout: a patch query (or a padding slot) sees its window's real
    patches and the prefix keys; a prefix query sees every real token."""
    (h, w), (wh, ww) = grid_size, window
    nh, nw, slots = _layout(grid_size, window)
    patches = nh * nw * slots

    def real(index):
        win, pos = index // slots, index % slots
        row, col = (win // nw) * wh + pos // ww, (win % nw) * ww + pos % ww
        return (pos < wh * ww) & (row < h) & (col < w)

    def mask_mod(b, head, q_index, kv_index):
        key_prefix = kv_index >= patches
        same_window = (q_index // slots) == (kv_index // slots)
        return key_prefix | (real(kv_index) & ((q_index >= patches) | same_window))

    return mask_mod


@functools.lru_cache(maxsize=16)
def window_block_mask(grid_size: Tuple[int, int], window: Tuple[int, int], num_prefix_tokens: int,
                      device: torch.device):
    """The BlockMask of :func:`window_mask_mod` (built once per grid, window, prefix and device)."""
    from torch.nn.attention.flex_attention import create_block_mask

    nh, nw, slots = _layout(grid_size, window)
    length = nh * nw * slots + num_prefix_tokens
    return create_block_mask(window_mask_mod(grid_size, window), None, None, length, length, device=device,
                             BLOCK_SIZE=BLOCK)


def flex_window_attention(
        qkv: torch.Tensor,
        grid_size: Tuple[int, int],
        window: Tuple[int, int],
        num_heads: int,
        num_prefix_tokens: int,
        rope: Optional[torch.Tensor],
        rotate_half: bool,
        block_mask,
) -> torch.Tensor:
    """Window attention of ``qkv`` (``[B, N, 3 * D]``) as :func:`~jetvit_mm.models.mixers.window.window_attention`
    computes it (before ``proj``: ``[B, N, D]``), with FlexAttention and :func:`window_block_mask`."""
    from torch.nn.attention.flex_attention import flex_attention

    B, N, D3 = qkv.shape
    q, k, v = qkv.reshape(B, N, 3, num_heads, D3 // (3 * num_heads)).permute(2, 0, 3, 1, 4).unbind(0)
    if rope is not None:
        q, k = rotate_query_key(q, k, rope, num_prefix_tokens, rotate_half)
    q, k, v = (window_major(t, grid_size, window, num_prefix_tokens) for t in (q, k, v))
    out = flex_attention(q, k, v, block_mask=block_mask)
    return row_major(out, grid_size, window, num_prefix_tokens)
