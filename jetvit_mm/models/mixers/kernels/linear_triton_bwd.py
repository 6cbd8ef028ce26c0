"""The L core's backward in Triton (:mod:`.linear_triton_bwd_kernels`, imported on first use) and the autograd
Function that trains through the fused Triton kernels: forward :func:`~.linear_triton.triton_linear_attention`,
backward three kernel launches (recompute ``S`` and ``z`` from K and V; Q's gradient with the partial ``dS``, ``dz``;
K's and V's gradients). ReLU features only (FLatten's focused ReLU trains on the torch path)."""
import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from .availability import triton_interpreting
from .linear_triton import BLOCK_N, _kernels, _splits, conv_arguments, launch_linear_attention


def _backward_kernels():
    """The backward kernels module, built in the current interpreter mode (after the forward kernels it uses)."""
    _kernels()
    return _kernels('linear_triton_bwd_kernels')


def _flags(qkv: torch.Tensor, num_heads: int, head_dim: int, table: Optional[torch.Tensor],
           rotate_half: bool) -> dict:
    import triton.language as tl

    f64 = qkv.dtype == torch.float64
    return dict(HEADS=num_heads, HEAD_DIM=head_dim, BLOCK_D=max(16, 1 << (head_dim - 1).bit_length()),
                HAS_ROPE=table is not None, ROTATE_HALF=rotate_half, BF16=qkv.dtype == torch.bfloat16,
                EMULATE=triton_interpreting(), F64=f64, ACC=tl.float64 if f64 else tl.float32)


def linear_attention_backward(qkv: torch.Tensor, table: Optional[torch.Tensor], grad: torch.Tensor, num_heads: int,
                              eps: float, rotate_half: bool = True) -> torch.Tensor:
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


def _conv_backward(grad: torch.Tensor, v: torch.Tensor, kernels: torch.Tensor,
                   per_image: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """The depthwise conv's backward (zero padding, same size) in fp32: the gradients of the values ``v``
    (``[B, D, h, w]``) and of the kernels (``[B, D * k * k]`` per image, or one ``[D, 1, k, k]`` kernel) for the
    output gradient ``grad`` (``[B, D, h, w]``), by ``aten.convolution_backward`` (no forward recomputed)."""
    B, D, h, w = v.shape
    k = math.isqrt(kernels[0].numel() // D) if per_image else kernels.shape[-1]
    weight = kernels.float().reshape(-1, 1, k, k)
    if per_image:  # images side by side as the channels of one image: one grouped conv, groups B * D
        grad, v = grad.reshape(1, B * D, h, w), v.reshape(1, B * D, h, w)
    d_v, d_weight, _ = torch.ops.aten.convolution_backward(
        grad.float().contiguous(), v.float().contiguous(), weight, None, [1, 1], [k // 2, k // 2], [1, 1], False,
        [0, 0], weight.shape[0], [True, True, False])
    return d_v.reshape(B, D, h, w), d_weight.reshape(kernels.shape)


def _generator_backward(d_kernels: torch.Tensor, mean: torch.Tensor,
                        weights: Tuple[torch.Tensor, ...]) -> Tuple[torch.Tensor, ...]:
    """The squeeze conv generator's backward (``fc2(silu(fc1(mean)))``, recomputed in fp32 from the saved mean of
    V): the gradients of the mean and of fc1's weight, fc2's weight and fc2's bias."""
    with torch.enable_grad():
        leaves = [t.detach().float().requires_grad_() for t in (mean, *weights)]
        kernels = F.linear(F.silu(F.linear(leaves[0], leaves[1])), leaves[2], leaves[3])
        grads = torch.autograd.grad(kernels, leaves, d_kernels)
    return tuple(g.to(t.dtype) for g, t in zip(grads, (mean, *weights)))


class TritonLinearAttention(torch.autograd.Function):
    """The L core plus the conv term on the Triton kernels, with a Triton backward for ``qkv`` (the RoPE table is a
    constant). A conv term the forward kernels applied (static kernel, squeeze generator) is differentiated with torch
    ops; one computed beforehand (``conv``) gets the output's gradient on the patch rows."""

    @staticmethod
    def forward(ctx, qkv: torch.Tensor, table: Optional[torch.Tensor], conv: Optional[torch.Tensor], num_heads: int,
                num_prefix_tokens: int, eps: float, rotate_half: bool, grid_h: int = 0, grid_w: int = 0,
                static: Optional[torch.Tensor] = None, fc1: Optional[torch.Tensor] = None,
                fc2: Optional[torch.Tensor] = None, fc2_bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        ctx.options = (num_heads, num_prefix_tokens, eps, rotate_half, (grid_h, grid_w))
        ctx.conv_dtype = None if conv is None else conv.dtype
        with torch.autocast(device_type=qkv.device.type, enabled=False):  # the generator in its weights' dtype
            out, kernels, mean = launch_linear_attention(qkv, table, conv, static, (fc1, fc2, fc2_bias), num_heads,
                                                         num_prefix_tokens, eps, None, rotate_half, (grid_h, grid_w),
                                                         keep_mean=True)
        ctx.save_for_backward(qkv, table, static if kernels is None else kernels, mean, fc1, fc2, fc2_bias)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        qkv, table, kernels, mean, fc1, fc2, fc2_bias = ctx.saved_tensors
        num_heads, prefix, eps, rotate_half, grid = ctx.options
        needs = ctx.needs_input_grad
        d_qkv = linear_attention_backward(qkv, table, grad, num_heads, eps, rotate_half) if needs[0] else None
        d_conv = grad[:, prefix:].to(ctx.conv_dtype) if needs[2] else None
        d_static = d_generator = None
        if kernels is not None:
            with torch.autocast(device_type=qkv.device.type, enabled=False):
                d_v, d_static, d_generator = _conv_term_backward(qkv, grad, kernels, mean, (fc1, fc2, fc2_bias),
                                                                 prefix, grid)
            if d_qkv is not None:
                v_grad = d_qkv[:, prefix:, 2 * (qkv.shape[-1] // 3):]
                v_grad.copy_(v_grad.float() + d_v)
        d_fc = d_generator if d_generator is not None else (None, None, None)
        return (d_qkv, None, d_conv, None, None, None, None, None, None, d_static if needs[9] else None,
                *(g if need else None for g, need in zip(d_fc, needs[10:])))


def _conv_term_backward(qkv: torch.Tensor, grad: torch.Tensor, kernels: torch.Tensor, mean: Optional[torch.Tensor],
                        generator: Tuple[torch.Tensor, ...], prefix: int,
                        grid: Tuple[int, int]) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[tuple]]:
    """The backward of the conv term the forward kernels computed: the gradient of the patch tokens' V
    (``[B, h * w, D]``, fp32), and of the static kernel or of the squeeze generator's weights (the other None)."""
    B, N, D3 = qkv.shape
    D, (h, w) = D3 // 3, grid
    to_grid = lambda t: t.reshape(B, h, w, D).permute(0, 3, 1, 2)  # noqa: E731
    squeeze = mean is not None
    d_v, d_kernels = _conv_backward(to_grid(grad[:, prefix:]), to_grid(qkv[:, prefix:, 2 * D:]), kernels, squeeze)
    d_v = d_v.flatten(2).transpose(1, 2)
    if not squeeze:
        return d_v, d_kernels.to(kernels.dtype), None
    d_mean, *d_generator = _generator_backward(d_kernels, mean, generator)
    return d_v + d_mean.float()[:, None, :] / (h * w), None, tuple(d_generator)


def trainable_triton_linear_attention(qkv: torch.Tensor, table: Optional[torch.Tensor], conv: Optional[torch.Tensor],
                                      num_heads: int, num_prefix_tokens: int, eps: float, rotate_half: bool = True,
                                      conv_weights: Optional[tuple] = None,
                                      grid_size: Optional[Tuple[int, int]] = None) -> torch.Tensor:
    """:func:`~.linear_triton.triton_linear_attention` (ReLU features, the same conv arguments) that autograd can
    differentiate."""
    static, generator, grid = conv_arguments(conv, conv_weights, grid_size)
    return TritonLinearAttention.apply(qkv, table, conv, num_heads, num_prefix_tokens, eps, rotate_half, *grid,
                                       static, *generator)
