"""Window layout of patch tokens: partition into zero-padded windows (with the prefix in front) and merge back."""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F


def window_blocks(grid: torch.Tensor, window: Tuple[int, int]) -> torch.Tensor:
    """The one window reordering: a token grid ``[..., h, w, C]`` as windows ``[..., nh, nw, wh * ww, C]`` (row-major
    windows, each row-major inside), zero-padded where the grid is not a multiple of the window. A view of ``grid``
    (a padded copy where padding is needed) until a caller reshapes it."""
    *lead, h, w, C = grid.shape
    wh, ww = window
    nh, nw = -(-h // wh), -(-w // ww)
    if (nh * wh, nw * ww) != (h, w):
        grid = F.pad(grid, (0, 0, 0, nw * ww - w, 0, nh * wh - h))
    n = len(lead)
    blocks = grid.reshape(*lead, nh, wh, nw, ww, C).permute(*range(n), n, n + 2, n + 1, n + 3, n + 4)
    return blocks.flatten(n + 2, n + 3)


def window_partition(x: torch.Tensor, grid_size: Tuple[int, int], window: Tuple[int, int],
                     prefix: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Split patch tokens ``[B, H, h * w, C]`` into zero-padded windows ``[B * num_windows, H, P + wh * ww, C]``,
    ``prefix`` (``[B, H, P, C]`` or None) in front of each: one new tensor, which keeps W's peak memory at F's."""
    B, H, _, C = x.shape
    (h, w), (wh, ww) = grid_size, window
    nh, nw = -(-h // wh), -(-w // ww)
    P = 0 if prefix is None else prefix.shape[2]
    out = x.new_empty(B, nh * nw, H, P + wh * ww, C)
    if prefix is not None:
        out[:, :, :, :P] = prefix.unsqueeze(1)
    windows = out[:, :, :, P:].unflatten(1, (nh, nw))  # [B, nh, nw, H, wh * ww, C], a view
    windows.copy_(window_blocks(x.reshape(B, H, h, w, C), window).permute(0, 2, 3, 1, 4, 5))
    return out.reshape(B * nh * nw, H, P + wh * ww, C)


def window_merge(x: torch.Tensor, batch: int, grid_size: Tuple[int, int], window: Tuple[int, int]) -> torch.Tensor:
    """Inverse of :func:`window_partition`, heads merged into channels: ``[B, h * w, H * C]``, padding dropped."""
    _, H, _, C = x.shape
    (h, w), (wh, ww) = grid_size, window
    nh, nw = -(-h // wh), -(-w // ww)
    x = x.reshape(batch, nh, nw, H, wh, ww, C).permute(0, 1, 4, 2, 5, 3, 6)
    x = x.reshape(batch, nh * wh, nw * ww, H * C)[:, :h, :w]
    return x.reshape(batch, h * w, H * C)


def window_key_mask(batch: int, grid_size: Tuple[int, int], window: Tuple[int, int], num_prefix_tokens: int,
                    device: torch.device) -> Optional[torch.Tensor]:
    """Boolean key mask ``[B * num_windows, 1, 1, P + wh * ww]`` (True = attend), None without padding."""
    (h, w), (wh, ww) = grid_size, window
    if h % wh == 0 and w % ww == 0:
        return None
    valid = torch.ones(1, 1, h * w, 1, dtype=torch.bool, device=device)
    valid = window_partition(valid, grid_size, window)[:, 0, :, 0]  # padding is False
    prefix = valid.new_ones(valid.shape[0], num_prefix_tokens)
    mask = torch.cat([prefix, valid], dim=1)
    return mask.repeat(batch, 1)[:, None, None, :]
