"""Launcher of the fused L Triton kernels (:mod:`.linear_triton_kernels`, imported on first use)."""
import importlib
from typing import Optional

import torch

from .availability import triton_interpreting

BLOCK_N = 64  # tokens per tile of the K/V pass
BLOCK_M = 64  # tokens per program of the Q pass
PROGRAMS_PER_SM = 4  # K/V pass: split the tokens so that the grid fills the GPU this many times over
_loaded = {}


def _kernels():
    """The kernels module, built in the current interpreter mode (TRITON_INTERPRET is read when kernels are built)."""
    mode = triton_interpreting()
    if _loaded.get('mode') is not mode:
        name = f'{__package__}.linear_triton_kernels'
        module = importlib.import_module(name)
        _loaded.update(mode=mode, module=importlib.reload(module) if 'module' in _loaded else module)
    return _loaded['module']


def _splits(batch_heads: int, num_tiles: int, device: torch.device) -> int:
    if device.type != 'cuda':
        return min(num_tiles, 2)  # the interpreter: a split, so the partial sums are exercised
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(num_tiles, -(-PROGRAMS_PER_SM * sms // batch_heads)))


def triton_linear_attention(
        qkv: torch.Tensor,
        table: Optional[torch.Tensor],
        conv: Optional[torch.Tensor],
        num_heads: int,
        num_prefix_tokens: int,
        eps: float,
        focusing: Optional[float] = None,
        rotate_half: bool = True,
) -> torch.Tensor:
    """Same contract as :func:`~.linear_fused.fused_linear_attention` (forward only), in two kernel launches."""
    kernels = _kernels()
    B, N, D3 = qkv.shape
    D = D3 // 3
    head_dim = D // num_heads
    if qkv.stride(-1) != 1:
        qkv = qkv.contiguous()
    block_d = max(16, 1 << (head_dim - 1).bit_length())  # tl.dot needs >= 16 and powers of two
    bh = B * num_heads
    tiles = -(-N // BLOCK_N)
    splits = _splits(bh, tiles, qkv.device)
    per_split = -(-tiles // splits)
    splits = -(-tiles // per_split)
    state = torch.empty(bh, splits, block_d, block_d, device=qkv.device, dtype=torch.float32)
    z_sum = torch.empty(bh, splits, block_d, device=qkv.device, dtype=torch.float32)
    if table is not None:
        table = table.to(device=qkv.device, dtype=torch.float32).contiguous()
    flags = dict(HEADS=num_heads, HEAD_DIM=head_dim, BLOCK_D=block_d, HAS_ROPE=table is not None,
                 ROTATE_HALF=rotate_half, FOCUS=focusing is not None, BF16=qkv.dtype == torch.bfloat16,
                 EMULATE=triton_interpreting())
    power = float(focusing) if focusing is not None else 1.0
    dummy = qkv  # never read when its flag is off
    kernels._kv_state[(bh, splits)](qkv, table if table is not None else dummy, state, z_sum, N, D, qkv.stride(0),
                                    qkv.stride(1), power, eps, BLOCK_N=BLOCK_N, TILES=per_split, **flags)
    state, z_sum = state.sum(dim=1).contiguous(), z_sum.sum(dim=1).contiguous()
    out = torch.empty(B, N, D, device=qkv.device, dtype=qkv.dtype)
    conv_strides = (conv.stride(0), conv.stride(1)) if conv is not None else (0, 0)
    if conv is not None and conv.stride(-1) != 1:
        conv = conv.contiguous()
        conv_strides = (conv.stride(0), conv.stride(1))
    kernels._q_output[(bh, -(-N // BLOCK_M))](
        qkv, table if table is not None else dummy, state, z_sum, conv if conv is not None else dummy, out, N, D,
        num_prefix_tokens, qkv.stride(0), qkv.stride(1), *conv_strides, out.stride(0), out.stride(1), power, eps,
        BLOCK_M=BLOCK_M, HAS_CONV=conv is not None, **flags)
    return out
