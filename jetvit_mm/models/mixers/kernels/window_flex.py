"""W with FlexAttention: patch queries in window-major order, one window per block pair; the prefix queries apart.

The RoPE pass writes q and k straight into window-major order (one fused kernel under torch.compile, the pass F
makes too); v is gathered in the same kernel. Each window's queries (its ``wh * ww`` patches, padded to a multiple
of FlexAttention's 128-token block) attend to the window and to the prefix keys, so the block mask skips all other
blocks: the work is the window attention's, not a masked full attention's. The few prefix queries attend to every
real token; in the Flex call they would fill one query block whose mask row allows every key block, and Flex does
not split a query block over keys, so one program per head would walk the whole sequence alone. They go through
SDPA over the row-major keys instead, whose kernels split long key ranges.
"""
from typing import Callable, Dict, Optional, Tuple

import torch

from ...caching import plain_tensors
from ..rope import rotate_query_key
from ..window_layout import window_blocks

BLOCK = 128  # FlexAttention's default sparse block
CACHE_SIZE = 16  # grids (x windows x prefix x device) whose masks and query orders are kept
_CACHE: Dict[tuple, object] = {}  # (builder name, *its arguments) -> what it built, in insertion order


@torch.compiler.disable
def _build_eagerly(name: str, builder: Callable[..., object], *args) -> object:
    """``builder(*args)`` run eagerly (a graph break inside a caller's torch.compile, taken once per key) and kept in
    ``_CACHE``; the oldest entry goes beyond ``CACHE_SIZE``. Built as plain tensors (:func:`plain_tensors`): a
    mask first built under ``inference_mode`` still serves a later backward."""
    key = (name, *args)
    if key not in _CACHE:
        while len(_CACHE) >= CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        with plain_tensors():
            _CACHE[key] = builder(*args)
    return _CACHE[key]


def _cached(name: str, builder: Callable[..., object], *args) -> object:
    """What ``builder(*args)`` built, built once per key outside any compiled graph: a kept one is looked up (inside
    a caller's torch.compile a plain dict read that dynamo resolves while tracing and guards on, so the graph takes
    its tensors as inputs and builds nothing), a missing one is built eagerly by :func:`_build_eagerly`."""
    found = _CACHE.get((name, *args))
    return found if found is not None else _build_eagerly(name, builder, *args)


def _layout(grid_size: Tuple[int, int], window: Tuple[int, int]) -> Tuple[int, int, int]:
    """(windows down, windows across, token slots per window: the window's patches rounded up to a block)."""
    (h, w), (wh, ww) = grid_size, window
    return -(-h // wh), -(-w // ww), -(-wh * ww // BLOCK) * BLOCK


def flex_windows(x: torch.Tensor, grid_size: Tuple[int, int], window: Tuple[int, int], num_prefix_tokens: int,
                 keep_prefix: bool = True) -> torch.Tensor:
    """``[B, H, P + h * w, C]`` -> ``[B, H, windows * slots (+ P), C]``: windows in order, zero-padded, then the
    prefix tokens (``keep_prefix``: the keys and values) or nothing (the patch queries)."""
    B, H, _, C = x.shape
    (h, w), (wh, ww) = grid_size, window
    nh, nw, slots = _layout(grid_size, window)
    windows = window_blocks(x[:, :, num_prefix_tokens:].reshape(B, H, h, w, C), window).flatten(2, 3)
    if not keep_prefix:
        return window_major_queries(x, grid_size, window, num_prefix_tokens)
    out = x.new_zeros(B, H, nh * nw * slots + num_prefix_tokens, C)  # one 4-D buffer, as FlexAttention takes it
    out[:, :, :nh * nw * slots].view(B, H, nh * nw, slots, C)[:, :, :, :wh * ww] = windows
    out[:, :, nh * nw * slots:] = x[:, :, :num_prefix_tokens]
    return out


def _query_order(grid_size: Tuple[int, int], window: Tuple[int, int], device: torch.device) -> torch.Tensor:
    """For each window-major query slot, the row-major patch it holds; padding slots point one past the last patch."""
    (h, w), (wh, ww) = grid_size, window
    nh, nw, slots = _layout(grid_size, window)
    win, pos = torch.arange(nh * nw * slots).div(slots, rounding_mode='floor'), torch.arange(nh * nw * slots) % slots
    row = (win // nw) * wh + pos // ww
    col = (win % nw) * ww + pos % ww
    real = (pos < wh * ww) & (row < h) & (col < w)
    return torch.where(real, row * w + col, h * w).to(device)


def window_major_queries(x: torch.Tensor, grid_size: Tuple[int, int], window: Tuple[int, int],
                         num_prefix_tokens: int) -> torch.Tensor:
    """The patch rows of ``x`` (``[B, H, P + h * w, C]``) in window-major order, padding slots zero:
    ``[B, H, windows * slots, C]``, gathered in one pass into a plain 4-D buffer (inductor's CPU Flex template reads
    the query's underlying buffer as 4-D, which a write through a 5-D window view would not be)."""
    patches = torch.nn.functional.pad(x[:, :, num_prefix_tokens:], (0, 0, 0, 1))  # one zero row for the padding
    order = _cached('query_order', _query_order, tuple(grid_size), tuple(window), x.device)
    return patches[:, :, order]


def row_major(patches: torch.Tensor, prefix: torch.Tensor, grid_size: Tuple[int, int],
              window: Tuple[int, int]) -> torch.Tensor:
    """The window-major patch outputs ``[B, H, windows * slots, C]`` back in row-major order after the prefix
    outputs ``[B, H, P, C]``, heads merged: ``[B, P + h * w, H * C]``."""
    B, H, _, C = patches.shape
    (h, w), (wh, ww) = grid_size, window
    nh, nw, slots = _layout(grid_size, window)
    windows = patches.reshape(B, H, nh, nw, slots, C)[:, :, :, :, :wh * ww]
    grid = windows.reshape(B, H, nh, nw, wh, ww, C).permute(0, 2, 4, 3, 5, 1, 6).reshape(B, nh * wh, nw * ww, H * C)
    out = grid[:, :h, :w].reshape(B, h * w, H * C)
    if prefix.shape[2]:
        out = torch.cat([prefix.transpose(1, 2).reshape(B, prefix.shape[2], H * C), out], dim=1)
    return out


def window_mask_mod(grid_size: Tuple[int, int], window: Tuple[int, int]):
    """FlexAttention ``mask_mod`` of the window-major layout: a patch query (or a padding slot) sees its window's real
    patches and the prefix keys (the keys after the windows)."""
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
        return key_prefix | (real(kv_index) & same_window)

    return mask_mod


def window_block_mask(grid_size: Tuple[int, int], window: Tuple[int, int], num_prefix_tokens: int,
                      device: torch.device):
    """The BlockMask of :func:`window_mask_mod`, the patch queries against all keys: built once per grid, window,
    prefix and device, eagerly (never inside a compiled graph), and kept."""
    return _cached('block_mask', _build_block_mask, tuple(grid_size), tuple(window), num_prefix_tokens,
                   torch.device(device))


def _build_block_mask(grid_size: Tuple[int, int], window: Tuple[int, int], num_prefix_tokens: int,
                      device: torch.device):
    from torch.nn.attention import flex_attention as flex

    nh, nw, slots = _layout(grid_size, window)
    queries = nh * nw * slots
    return flex.create_block_mask(window_mask_mod(grid_size, window), None, None, queries,
                                  queries + num_prefix_tokens, device=device, BLOCK_SIZE=BLOCK)


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
    # the prefix queries see every real token: SDPA over the row-major keys
    prefix = torch.nn.functional.scaled_dot_product_attention(q[:, :, :num_prefix_tokens], k, v)
    patches = flex_attention(flex_windows(q, grid_size, window, num_prefix_tokens, keep_prefix=False),
                             flex_windows(k, grid_size, window, num_prefix_tokens),
                             flex_windows(v, grid_size, window, num_prefix_tokens), block_mask=block_mask)
    return row_major(patches, prefix, grid_size, window)
