"""The L core's backward in Triton (:mod:`.linear_triton_bwd_kernels`, imported on first use) and the autograd
Function that trains through the fused Triton kernels: forward :func:`~.linear_triton.triton_linear_attention`,
backward three kernel launches (recompute ``S`` and ``z`` from K and V; Q's gradient with the partial ``dS``, ``dz``;
K's and V's gradients). ReLU features only (FLatten's focused ReLU trains on the torch path)."""
import importlib
from typing import Optional, Tuple

import torch

from .availability import triton_interpreting
from .linear_triton import BLOCK_N, _kernels, _splits, triton_linear_attention

_loaded = {}


def _backward_kernels():
    """The backward kernels module, built in the current interpreter mode (after the forward kernels it uses)."""
    _kernels()
    mode = triton_interpreting()
    if _loaded.get('mode') is not mode:
        name = f'{__package__}.linear_triton_bwd_kernels'
        module = importlib.import_module(name)
        _loaded.update(mode=mode, module=importlib.reload(module) if 'module' in _loaded else module)
    return _loaded['module']


def _flags(qkv: torch.Tensor, num_heads: int, head_dim: int, table: Optional[torch.Tensor],
           rotate_half: bool) -> dict:
    import triton.language as tl

    f64 = qkv.dtype == torch.float64
    return dict(HEADS=num_heads, HEAD_DIM=head_dim, BLOCK_D=max(16, 1 << (head_dim - 1).bit_length()),
                HAS_ROPE=table is not None, ROTATE_HALF=rotate_half, BF16=qkv.dtype == torch.bfloat16,
                EMULATE=triton_interpreting(), F64=f64, ACC=tl.float64 if f64 else tl.float32)


def linear_attention_backward(
        qkv: torch.Tensor,
        table: Optional[torch.Tensor],
        grad: torch.Tensor,
        num_heads: int,
        eps: float,
        rotate_half: bool = True,
) -> torch.Tensor:
    """The gradient of ``qkv`` (``[B, N, 3 * D]``, in its dtype) for the L core's output gradient ``grad``
    (``[B, N, D]``): the core of :func:`~.linear_fused.fused_linear_attention` with ReLU features and without the
    conv term. float64 inputs are computed in float64 throughout (checks), others as the forward kernels do."""
    kernels = _backward_kernels()
    B, N, D3 = qkv.shape
    D = D3 // 3
    if qkv.stride(-1) != 1:
        qkv = qkv.contiguous()
    if grad.stride(-1) != 1:
        grad = grad.contiguous()
    flags = _flags(qkv, num_heads, D // num_heads, table, rotate_half)
    block_d, acc = flags['BLOCK_D'], torch.float64 if flags['F64'] else torch.float32
    if table is not None:
        table = table.to(device=qkv.device, dtype=acc).contiguous()
    table_arg = table if table is not None else qkv  # never read without RoPE
    bh, tiles = B * num_heads, -(-N // BLOCK_N)
    per_split = -(-tiles // _splits(bh, tiles, qkv.device))
    splits = -(-tiles // per_split)
    state = torch.empty(bh, splits, block_d, block_d, device=qkv.device, dtype=acc)
    z_sum = torch.empty(bh, splits, block_d, device=qkv.device, dtype=acc)
    kernels._state[(bh, splits)](qkv, table_arg, state, z_sum, N, D, qkv.stride(0), qkv.stride(1),
                                 BLOCK_N=BLOCK_N, TILES=per_split, **flags)
    state, z_sum = state.sum(dim=1).contiguous(), z_sum.sum(dim=1).contiguous()
    dqkv = torch.empty(B, N, D3, device=qkv.device, dtype=qkv.dtype)
    d_state = torch.empty(bh, splits, block_d, block_d, device=qkv.device, dtype=acc)
    d_z = torch.empty(bh, splits, block_d, device=qkv.device, dtype=acc)
    kernels._q_grad[(bh, splits)](qkv, table_arg, state, z_sum, grad, dqkv, d_state, d_z, N, D, qkv.stride(0),
                                  qkv.stride(1), grad.stride(0), grad.stride(1), dqkv.stride(0), dqkv.stride(1),
                                  eps, BLOCK_N=BLOCK_N, TILES=per_split, **flags)
    d_state, d_z = d_state.sum(dim=1).contiguous(), d_z.sum(dim=1).contiguous()
    kernels._kv_grad[(bh, tiles)](qkv, table_arg, d_state, d_z, dqkv, N, D, qkv.stride(0), qkv.stride(1),
                                  dqkv.stride(0), dqkv.stride(1), BLOCK_N=BLOCK_N, **flags)
    return dqkv


class TritonLinearAttention(torch.autograd.Function):
    """The L core plus the conv term on the Triton kernels, with a Triton backward: gradients for ``qkv`` and the
    conv term (the output's gradient on the patch rows); the RoPE table is a constant (none flows to it)."""

    @staticmethod
    def forward(ctx, qkv: torch.Tensor, table: Optional[torch.Tensor], conv: Optional[torch.Tensor], num_heads: int,
                num_prefix_tokens: int, eps: float, rotate_half: bool) -> torch.Tensor:
        ctx.save_for_backward(qkv, table)
        ctx.options = (num_heads, num_prefix_tokens, eps, rotate_half)
        ctx.conv_dtype = None if conv is None else conv.dtype
        return triton_linear_attention(qkv, table, conv, num_heads, num_prefix_tokens, eps, None, rotate_half)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        qkv, table = ctx.saved_tensors
        num_heads, prefix, eps, rotate_half = ctx.options
        d_qkv = linear_attention_backward(qkv, table, grad, num_heads, eps, rotate_half) \
            if ctx.needs_input_grad[0] else None
        d_conv = grad[:, prefix:].to(ctx.conv_dtype) if ctx.needs_input_grad[2] else None
        return d_qkv, None, d_conv, None, None, None, None


def trainable_triton_linear_attention(
        qkv: torch.Tensor,
        table: Optional[torch.Tensor],
        conv: Optional[torch.Tensor],
        num_heads: int,
        num_prefix_tokens: int,
        eps: float,
        rotate_half: bool = True,
) -> torch.Tensor:
    """:func:`~.linear_triton.triton_linear_attention` (ReLU features) that autograd can differentiate."""
    return TritonLinearAttention.apply(qkv, table, conv, num_heads, num_prefix_tokens, eps, rotate_half)
