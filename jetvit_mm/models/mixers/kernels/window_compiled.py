"""W for torch.compile on the CPU: the torch path's windows, with each window's keys padded to a multiple of 16,
built in one pass per tensor in a window-major layout that the prefix queries' attention reads too.

PyTorch's CPU flash attention runs its bf16 matrix units on key blocks that are a multiple of 16 long: a window of
261 keys (16 x 16 + 5 prefix tokens) takes it off that path (about 2x slower in bf16 on an AMX Xeon); masked padding
to 272 computes the same attention. Layout ``[B, heads, windows, keys, head_dim]``: the keys of all windows are one
view, which the prefix queries attend to with a mask that keeps every real key once.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from ..window_layout import window_blocks, window_partition
from .linear_fused import rotate, rotation_table

KEY_MULTIPLE = 16


def padded_key_mask(grid_size: Tuple[int, int], window: Tuple[int, int], num_prefix_tokens: int, keys: int,
                    device: torch.device) -> torch.Tensor:
    """Boolean key mask ``[windows or 1, 1, 1, keys]`` (one row when no window has grid padding): prefix and real
    patches True, padding False."""
    (h, w), (wh, ww) = grid_size, window
    valid = torch.ones(1, 1, h * w, 1, dtype=torch.bool, device=device)
    valid = window_partition(valid, grid_size, window)[:, 0, :, 0]  # [windows, wh * ww], grid padding False
    valid = torch.cat([valid.new_ones(valid.shape[0], num_prefix_tokens), valid], dim=1)
    valid = F.pad(valid, (0, keys - valid.shape[1]), value=False)
    return valid[:1 if h % wh == 0 and w % ww == 0 else None, None, None, :]


def rows_as_windows(x: torch.Tensor, grid_size: Tuple[int, int], window: Tuple[int, int]) -> torch.Tensor:
    """Patch rows ``[B, h * w, ...]`` (any strides) as windows ``[B, windows, wh * ww, ...]``, zero-padded where the
    grid is not a multiple of the window."""
    B, rest = x.shape[0], x.shape[2:]
    blocks = window_blocks(x.reshape(B, *grid_size, -1), window)
    return blocks.reshape(B, -1, blocks.shape[-2], *rest)


def prefix_key_mask(windows: int, keys: int, window_keys: torch.Tensor, num_prefix_tokens: int) -> torch.Tensor:
    """Boolean mask ``[1, 1, 1, windows * keys]`` over the window-major keys for the prefix queries: every real key
    once (the prefix slots of window 0 only, every window's real patches, no padding)."""
    valid = window_keys.reshape(-1, keys).expand(windows, keys).clone()  # one row per window
    valid[1:, :num_prefix_tokens] = False
    return valid.reshape(1, 1, 1, windows * keys)


@torch.library.custom_op('jetvit::window_and_prefix_attention', mutates_args=())
def window_and_prefix_attention(q_win: torch.Tensor, k_win: torch.Tensor, v_win: torch.Tensor, mask: torch.Tensor,
                                q_prefix: torch.Tensor, prefix_mask: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """The two attentions of W on one set of window-major keys (``[B, heads, windows, keys, C]``): the windows'
    queries on their window and the prefix queries on every key once. One operator for torch.compile, so that
    inductor does not copy the shared key and value buffers once per attention call."""
    B, H, W, K, C = k_win.shape
    out = F.scaled_dot_product_attention(q_win.flatten(0, 1), k_win.flatten(0, 1), v_win.flatten(0, 1),
                                         attn_mask=mask)
    out_prefix = F.scaled_dot_product_attention(q_prefix, k_win.reshape(B, H, W * K, C),
                                                v_win.reshape(B, H, W * K, C), attn_mask=prefix_mask)
    return out.contiguous(), out_prefix.contiguous()  # the strides the fake kernel promises


@window_and_prefix_attention.register_fake
def _(q_win, k_win, v_win, mask, q_prefix, prefix_mask):
    return (q_win.new_empty(q_win.shape[0] * q_win.shape[1], *q_win.shape[2:]),
            q_prefix.new_empty(q_prefix.shape))


def padded_window_attention(qkv: torch.Tensor, grid_size: Tuple[int, int], window: Tuple[int, int], num_heads: int,
                            num_prefix_tokens: int, rope: Optional[torch.Tensor] = None,
                            rotate_half: bool = True) -> torch.Tensor:
    """What :func:`~jetvit_mm.models.mixers.window.window_attention` computes (inference, no dropout), with padded
    keys: ``[B, N, D]`` before ``proj``."""
    B, N, D3 = qkv.shape
    D, P, C = D3 // 3, num_prefix_tokens, D3 // 3 // num_heads
    (h, w), (wh, ww) = grid_size, window
    q, k, v = qkv.reshape(B, N, 3, num_heads, C).unbind(2)  # [B, N, heads, C], views of qkv
    # the sign each feature's partner enters with is folded into sin for both layouts (what ``rotate`` expects)
    table = None if rope is None else rows_as_windows(rotation_table(rope, 0, rotate_half)[None], grid_size,
                                                   window)[:, None]  # [1, 1, windows, S, 2 * C]
    S = wh * ww
    keys = -(-(P + S) // KEY_MULTIPLE) * KEY_MULTIPLE

    def windows(t: torch.Tensor, rotated: bool) -> torch.Tensor:  # patches of t -> [B, heads, windows, S, C]
        t = rows_as_windows(t[:, P:], grid_size, window).permute(0, 3, 1, 2, 4)
        if rotated and table is not None:
            t = rotate(t.float(), table, rotate_half).to(t.dtype)
        return t

    q_win = windows(q, True).contiguous()  # written once, in the layout attention reads
    nwin = q_win.shape[2]

    def keys_of(t: torch.Tensor, rotated: bool) -> torch.Tensor:  # [prefix, window's patches, zero padding]
        parts = [windows(t, rotated), t.new_zeros(B, num_heads, nwin, keys - P - S, C)]
        if P > 0:
            parts.insert(0, t[:, :P].permute(0, 2, 1, 3)[:, :, None].expand(B, num_heads, nwin, P, C))
        return torch.cat(parts, dim=3)

    k_win, v_win = keys_of(k, True), keys_of(v, False)
    mask = padded_key_mask(grid_size, window, P, keys, qkv.device)  # [windows or 1, 1, 1, keys]
    if P == 0:
        out = F.scaled_dot_product_attention(q_win.flatten(0, 1), k_win.flatten(0, 1), v_win.flatten(0, 1),
                                             attn_mask=mask.reshape(1, -1, 1, keys))  # [B * heads, windows, S, C]
    else:
        out, out_prefix = window_and_prefix_attention(q_win, k_win, v_win, mask.reshape(1, -1, 1, keys),
                                                      q[:, :P].transpose(1, 2).contiguous(),
                                                      prefix_key_mask(nwin, keys, mask, P))
    nh, nw = -(-h // wh), -(-w // ww)
    out = out.reshape(B, num_heads, nh, nw, wh, ww, C).permute(0, 2, 4, 3, 5, 1, 6)
    out = out.reshape(B, nh * wh, nw * ww, D)[:, :h, :w].reshape(B, h * w, D)
    if P == 0:
        return out
    return torch.cat([out_prefix.transpose(1, 2).reshape(B, P, D), out], dim=1)
