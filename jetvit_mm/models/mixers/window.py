"""Window attention with global prefix tokens: the 'W' mixer."""
import numbers
from typing import Any, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..tracing import exporting, exporting_symbolic_grid
from .base import TokenMixer
from .kernels import (
    AUTO_COMPILE_MIN_ELEMENTS,
    WINDOW_KERNELS,
    check_kernel,
    compiled,
    flex_window_attention,
    resolve_once,
    select_window_kernel,
)
from .kernels.selfcheck import checked_path, mixer_probe
from .kernels.window_compiled import padded_window_attention
from .kernels.window_flex import window_block_mask, window_token_orders
from .rope import check_num_tokens, rotate_query_key
from .window_export import fixed_grid_window_attention, masked_window_attention
from .window_layout import window_key_mask, window_merge, window_partition


def check_window_size(window_size: Any) -> None:
    """ValueError naming ``window_size`` unless it is an int >= 1 (NaN, 0, negatives, floats, bools refused)."""
    if isinstance(window_size, bool) or not isinstance(window_size, numbers.Integral) or window_size < 1:
        raise ValueError(f'window_size must be >= 1, an int (the W mixer\'s window side, in patches), got '
                         f'{window_size!r} ({type(window_size).__name__}); e.g. window_size=16')


def window_attention(qkv: torch.Tensor, grid_size: Tuple[int, int], window: Tuple[int, int], num_heads: int,
                     num_prefix_tokens: int, rope: Optional[torch.Tensor] = None, rotate_half: bool = True,
                     dropout_p: float = 0.) -> torch.Tensor:
    """Window attention with global prefix tokens on ``qkv`` (``[B, N, 3 * D]``, the qkv Linear's output): heads
    merged, before ``proj``, ``[B, N, D]``: the torch path."""
    B, N, D3 = qkv.shape
    D, P = D3 // 3, num_prefix_tokens
    q, k, v = qkv.reshape(B, N, 3, num_heads, D // num_heads).permute(2, 0, 3, 1, 4).unbind(0)
    if rope is not None:
        q, k = rotate_query_key(q, k, rope, P, rotate_half)

    # prefix queries attend globally; then each of q, k, v is windowed and dropped, so that at most one
    # extra copy of a (rotated) q/k/v is alive besides qkv at any time
    out_prefix = F.scaled_dot_product_attention(q[:, :, :P], k, v, dropout_p=dropout_p) if P > 0 else None
    q_win = window_partition(q[:, :, P:], grid_size, window)
    del q
    k_win = window_partition(k[:, :, P:], grid_size, window, prefix=k[:, :, :P] if P > 0 else None)
    del k
    v_win = window_partition(v[:, :, P:], grid_size, window, prefix=v[:, :, :P] if P > 0 else None)
    del v
    mask = window_key_mask(B, grid_size, window, P, qkv.device)
    out_win = F.scaled_dot_product_attention(q_win, k_win, v_win, attn_mask=mask, dropout_p=dropout_p)
    del q_win, k_win, v_win
    out = window_merge(out_win, B, grid_size, window)
    if out_prefix is not None:
        out = torch.cat([out_prefix.transpose(1, 2).reshape(B, P, D), out], dim=1)
    return out


class WindowAttention(TokenMixer):
    """Softmax attention in non-overlapping ``window_size`` x ``window_size`` patch windows.

    Patch queries see their window's patches plus all prefix tokens; prefix queries see all tokens. RoPE is applied
    on the full grid before windowing, so every token keeps its global position. Grids that are not a multiple of
    the window are zero-padded and the padded keys masked out. A grid side shorter than the window uses one window
    of that side's length (the same result as padding, without the wasted work).

    ``kernel``: a deployment switch (:mod:`~jetvit_mm.models.mixers.kernels.dispatch`). Attention dropout, like
    training on any path but ``'flex'`` on CUDA, runs the torch path.
    """

    deployment_options = ('kernel',)

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True, proj_bias: bool = True,
                 num_prefix_tokens: int = 1, rotate_half: bool = True, attn_drop: float = 0., proj_drop: float = 0.,
                 window_size: int = 16, kernel: str = 'auto') -> None:
        super().__init__(dim, num_heads, qkv_bias, proj_bias, num_prefix_tokens, rotate_half, proj_drop)
        check_window_size(window_size)
        self.window_size = window_size
        self.kernel = check_kernel(kernel, WINDOW_KERNELS, 'mixers.W.kernel')
        self.attn_drop = nn.Dropout(attn_drop)
        self._kernel_paths = {}  # (kernel, device, qkv dtype, grad enabled, dropout, large input) -> path

    def forward(self, x: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Mix ``x`` (``[B, N, D]``) with window attention; ``rope`` is ``(h * w, 2 * head_dim)`` or None."""
        B, N, D = x.shape
        P = self.num_prefix_tokens
        check_num_tokens(N, P, grid_size)
        if exporting() and not exporting_symbolic_grid():  # ONNX at one input shape: the windows, export-shaped
            window = (min(self.window_size, grid_size[0]), min(self.window_size, grid_size[1]))
            out = fixed_grid_window_attention(*self.projections(x), tuple(grid_size), window, self.num_heads, P,
                                              rope, self.rotate_half)
            return self.proj_drop(self.proj(out))
        qkv = self.qkv(x)
        if exporting_symbolic_grid():  # ONNX at any size: the same attention as one masked full attention
            out = masked_window_attention(qkv, tuple(grid_size), self.window_size, self.num_heads, P, rope,
                                          self.rotate_half)
            return self.proj_drop(self.proj(out))
        path = self.kernel_path(x, qkv.dtype, grid_size, rope)
        return self.proj_drop(self.proj(self.attend(qkv, tuple(grid_size), rope, path)))

    def kernel_path(self, x: torch.Tensor, dtype: torch.dtype, grid_size: Tuple[int, int],
                    rope: Optional[torch.Tensor]) -> str:
        """The path :meth:`attend` takes for input ``x`` whose qkv has ``dtype`` (bf16 under autocast): chosen once
        per kernel option, device, dtype, grad mode and dropout (no look at the parameters), then held to the
        self-check's verdicts for ``dtype`` (forward, and backward with grad)."""
        grad = torch.is_grad_enabled()
        dropout = self.training and self.attn_drop.p > 0  # the fast paths have no attention dropout
        key = (self.kernel, x.device, dtype, grad, dropout, x.numel() >= AUTO_COMPILE_MIN_ELEMENTS)
        path = resolve_once(self._kernel_paths, key, lambda: select_window_kernel(
            self.kernel, x.device, x.numel(), grad, dropout))
        return checked_path(path, x.device, dtype, grad,
                            lambda: mixer_probe(self, self.attend, path, x, tuple(grid_size), rope, grad))

    def attend(self, qkv: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor],
               path: str) -> torch.Tensor:
        """The window attention of ``qkv`` (``[B, N, 3 * D]``) on ``path``, before ``proj``: ``[B, N, D]``."""
        P = self.num_prefix_tokens
        window = (min(self.window_size, grid_size[0]), min(self.window_size, grid_size[1]))
        args = (qkv, grid_size, window, self.num_heads, P, rope, self.rotate_half)
        if path == 'flex':
            # kept per grid: inputs of the compiled function; in a caller's graph that finds none kept, built there
            layout = (window_block_mask(grid_size, window, P, qkv.device),
                      window_token_orders(grid_size, window, qkv.device))
            if torch.compiler.is_compiling():  # traced inline
                return flex_window_attention(*args, *layout)
            return compiled(flex_window_attention, qkv.shape)(*args, *layout)
        if path == 'compile':
            padded = padded_window_attention if torch.compiler.is_compiling() else \
                compiled(padded_window_attention, qkv.shape)
            return padded(*args)
        return window_attention(*args, dropout_p=self.attn_drop.p if self.training else 0.)
