"""Launcher of the fused L Triton kernels (:mod:`.linear_triton_kernels`, imported on first use), registered as the
torch custom op ``jetvit::linear_attention_triton`` (``torch.library.triton_op``): a caller's torch.compile keeps the
op (inductor calls the kernels themselves) instead of tracing a torch formula in its place. The squeeze conv: the
mean of V comes out of the K/V pass, its generator runs as one small launch between the passes, and the Q pass
convolves V at the ``k * k`` shifted positions.
"""
import importlib
import math
from typing import Optional, Sequence, Tuple

import torch
from torch.library import triton_op, wrap_triton

from .availability import triton_interpreting

BLOCK_N = 64  # tokens per tile of the K/V pass
BLOCK_M = 64  # tokens per program of the Q pass
# the Q pass with the conv computed in the kernel: one grid row per program where the row, rounded up to a power of
# two (at least 16 rows for tl.dot), leaves at most this share of the tile idle and fits ROW_TILE_MAX tokens
ROW_TILE_IDLE, ROW_TILE_MAX = 0.25, 256
GENERATOR_BLOCK_IN, GENERATOR_BLOCK_OUT, GENERATOR_TILES = 64, 64, 16  # the squeeze generator's launch
PROGRAMS_PER_SM = 4  # K/V pass: split the tokens so that the grid fills the GPU this many times over
CONV_KINDS = ('static', 'squeeze')
OP_NAME = 'jetvit::linear_attention_triton'
_loaded = {}  # kernels module -> (the interpreter mode it was built in, the module)


def _kernels(name: str = 'linear_triton_kernels'):
    """The kernels module ``name`` of this package, built in the current interpreter mode (TRITON_INTERPRET is read
    when kernels are built)."""
    mode, found = triton_interpreting(), _loaded.get(name)
    if found is None or found[0] is not mode:
        module = importlib.import_module(f'{__package__}.{name}')
        _loaded[name] = mode, importlib.reload(module) if found else module
    return _loaded[name][1]


def _launcher(kernel):
    """``wrap_triton(kernel)``, what a caller's torch.compile traces as the kernel itself. torch 2.11's
    ``wrap_triton`` refuses the Triton interpreter's kernels (later versions take them): there, under
    ``TRITON_INTERPRET=1`` only, the kernel is launched as it is (eager only; a compiled graph cannot trace it)."""
    try:
        return wrap_triton(kernel)
    except RuntimeError:
        if not triton_interpreting():
            raise
        return kernel


def _splits(batch_heads: int, num_tiles: int, device: torch.device) -> int:
    if device.type != 'cuda':
        return min(num_tiles, 2)  # the interpreter: a split, so the partial sums are exercised
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(num_tiles, -(-PROGRAMS_PER_SM * sms // batch_heads)))


def q_tiles(num_tokens: int, num_prefix_tokens: int, grid: Tuple[int, int], depthwise: bool) -> Tuple[int, int, bool]:
    """The Q pass's tiling: (tokens per program, programs per image and head, whether a program holds one whole grid
    row). Whole rows where the conv is computed in the kernel and the row fits a power-of-two tile with little idle
    (:data:`ROW_TILE_IDLE`, :data:`ROW_TILE_MAX`); fixed :data:`BLOCK_M`-token tiles otherwise."""
    gh, gw = grid
    block = max(16, 1 << max(gw - 1, 0).bit_length())
    fits = block <= ROW_TILE_MAX and block - gw <= ROW_TILE_IDLE * block and num_prefix_tokens <= block
    if depthwise and fits and num_tokens == num_prefix_tokens + gh * gw:
        return block, gh + (num_prefix_tokens > 0), True
    return BLOCK_M, -(-num_tokens // BLOCK_M), False


def triton_linear_attention(qkv: torch.Tensor, table: Optional[torch.Tensor], conv: Optional[torch.Tensor],
                            num_heads: int, num_prefix_tokens: int, eps: float, focusing: Optional[float] = None,
                            rotate_half: bool = True, *, conv_weights: Optional[Tuple] = None,
                            grid_size: Optional[Tuple[int, int]] = None) -> torch.Tensor:
    """Same contract as :func:`~.linear_fused.fused_linear_attention` (forward only), in two kernel launches; with
    ``conv_weights`` (and the patch ``grid_size``) the kernels compute the static or squeeze conv term themselves
    (``conv`` must then be None)."""
    static, (fc1, fc2, fc2_bias), grid = conv_arguments(conv, conv_weights, grid_size)
    return torch.ops.jetvit.linear_attention_triton(qkv, table, conv, static, fc1, fc2, fc2_bias, num_heads,
                                                    num_prefix_tokens, eps, focusing, rotate_half, grid[0], grid[1])


def conv_arguments(conv: Optional[torch.Tensor], conv_weights: Optional[Tuple],
                   grid_size: Optional[Tuple[int, int]]) -> Tuple[Optional[torch.Tensor], tuple, Tuple[int, int]]:
    """``conv_weights`` (``('static', weight)``, ``('squeeze', fc1, fc2, fc2 bias)`` or None) as the launches take
    them: the static kernel, the generator's three weights (or Nones) and the patch grid ((0, 0) without them)."""
    if conv_weights is None:
        return None, (None, None, None), (0, 0)
    if conv is not None or grid_size is None or conv_weights[0] not in CONV_KINDS:
        raise ValueError(f'conv_weights ({", ".join(CONV_KINDS)}, weights...) takes the patch grid_size and no '
                         f'precomputed conv; got {conv_weights[0]!r}, grid_size={grid_size}, conv given: '
                         f'{conv is not None}')
    grid = (int(grid_size[0]), int(grid_size[1]))
    if conv_weights[0] == 'static':
        return conv_weights[1], (None, None, None), grid
    return None, tuple(conv_weights[1:]), grid


def _dynamic_kernels(kernels, sums: torch.Tensor, batch: int, dim: int, block_d: int, patches: int,
                     generator: Sequence[torch.Tensor], flags: dict) -> torch.Tensor:
    """The squeeze conv's per-image kernels ``[B, D * k * k]`` (fp32) from the K/V pass's sums of V and the
    generator's weights: one small launch (a program per image and 1024 kernel rows)."""
    fc1, fc2, fc2_bias = (t.contiguous() for t in generator)
    hidden, out_rows = fc1.shape[0], fc2.shape[0]
    kern = torch.empty(batch, out_rows, device=sums.device, dtype=torch.float32)
    block_out, tiles = GENERATOR_BLOCK_OUT, GENERATOR_TILES
    _launcher(kernels._generator)[(batch, -(-out_rows // (block_out * tiles)))](
        sums, fc1, fc2, fc2_bias, kern, 1.0 / patches, dim, hidden, out_rows, HEADS=flags['HEADS'],
        HEAD_DIM=flags['HEAD_DIM'], BLOCK_D=block_d, BLOCK_IN=GENERATOR_BLOCK_IN,
        BLOCK_HID=max(16, 1 << (hidden - 1).bit_length()), BLOCK_OUT=block_out, OUT_TILES=tiles)
    return kern


def _v_mean(sums: torch.Tensor, batch: int, head_dim: int, block_d: int, patches: int) -> torch.Tensor:
    """The mean of the patch tokens' V, ``[B, D]`` in fp32, from the K/V pass's sums (for the training backward)."""
    start = block_d * (block_d + 1)
    return sums[:, start:start + head_dim].reshape(batch, -1) / patches  # heads in order


@triton_op(OP_NAME, mutates_args=())
def _linear_attention_op(
        qkv: torch.Tensor, table: Optional[torch.Tensor], conv: Optional[torch.Tensor],
        static_kernel: Optional[torch.Tensor], fc1_weight: Optional[torch.Tensor], fc2_weight: Optional[torch.Tensor],
        fc2_bias: Optional[torch.Tensor], num_heads: int, num_prefix_tokens: int, eps: float,
        focusing: Optional[float], rotate_half: bool, grid_h: int, grid_w: int) -> torch.Tensor:
    """The two launches (K/V pass, Q pass) and, for the squeeze conv, its generator between them."""
    return launch_linear_attention(qkv, table, conv, static_kernel, (fc1_weight, fc2_weight, fc2_bias), num_heads,
                                   num_prefix_tokens, eps, focusing, rotate_half, (grid_h, grid_w))[0]


def launch_linear_attention(
        qkv: torch.Tensor, table: Optional[torch.Tensor], conv: Optional[torch.Tensor],
        static_kernel: Optional[torch.Tensor], generator: Sequence[Optional[torch.Tensor]], num_heads: int,
        num_prefix_tokens: int, eps: float, focusing: Optional[float], rotate_half: bool,
        grid: Tuple[int, int], keep_mean: bool = False
) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """What the op computes (``generator``: fc1, fc2 and fc2's bias of the squeeze conv, or Nones), plus what the
    training path's backward needs of the squeeze conv: its per-image kernels ``[B, D * k * k]`` and (with
    ``keep_mean``) the mean of V they came from (``[B, D]``); None for the other convs."""
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
    squeeze = generator[0] is not None
    sums = torch.zeros(bh, block_d * (block_d + 2), device=qkv.device, dtype=torch.float32)  # S, z, sum of V
    if table is not None:  # read as fp32, or as bf16 for bf16 inputs if given so (half the bytes)
        bf16_table = table.dtype == torch.bfloat16 and qkv.dtype == torch.bfloat16
        table = table.to(device=qkv.device, dtype=torch.bfloat16 if bf16_table else torch.float32).contiguous()
    flags = dict(HEADS=num_heads, HEAD_DIM=head_dim, BLOCK_D=block_d, HAS_ROPE=table is not None,
                 ROTATE_HALF=rotate_half, FOCUS=focusing is not None, BF16=qkv.dtype == torch.bfloat16,
                 EMULATE=triton_interpreting())
    power = float(focusing) if focusing is not None else 1.0
    dummy = qkv  # never read when its flag is off
    P = num_prefix_tokens
    _launcher(kernels._kv_state)[(bh, splits)](
        qkv, table if table is not None else dummy, sums, N, D, P, qkv.stride(0), qkv.stride(1), power, eps,
        BLOCK_N=BLOCK_N, TILES=per_split, V_SUM=squeeze, **flags)
    kern, mean, stride_kb, ksize = None, None, 0, 1
    if squeeze:
        kern = _dynamic_kernels(kernels, sums, B, D, block_d, grid[0] * grid[1], generator, flags)
        mean = _v_mean(sums, B, head_dim, block_d, grid[0] * grid[1]) if keep_mean else None
        ksize, stride_kb = math.isqrt(kern.shape[1] // D), kern.shape[1]
    elif static_kernel is not None:
        kern, ksize = static_kernel, static_kernel.shape[-1]  # one kernel for every image: batch stride 0
    if kern is not None:
        kern = kern.contiguous()
    out = torch.empty(B, N, D, device=qkv.device, dtype=qkv.dtype)
    if conv is not None and conv.stride(-1) != 1:
        conv = conv.contiguous()
    conv_strides = (conv.stride(0), conv.stride(1)) if conv is not None else (0, 0)
    block_m, programs, row_tiles = q_tiles(N, P, grid, kern is not None)
    _launcher(kernels._q_output)[(bh, programs)](
        qkv, table if table is not None else dummy, sums, conv if conv is not None else dummy,
        kern if kern is not None else dummy, out, N, D, P, grid[0], grid[1], qkv.stride(0), qkv.stride(1),
        *conv_strides, stride_kb, out.stride(0), out.stride(1), power, eps, BLOCK_M=block_m,
        HAS_CONV=conv is not None, DEPTHWISE=kern is not None, KSIZE=ksize, ROW_TILES=row_tiles,
        num_warps=max(4, block_m // 16), **flags)  # a warp per 16 rows: as many registers per thread at any tile
    return out, (kern if squeeze else None), mean


@_linear_attention_op.register_fake
def _linear_attention_shape(qkv: torch.Tensor, *args) -> torch.Tensor:
    """The op's output without running it (FakeTensor, meta, tracing): ``[B, N, D]`` in the input's dtype. Written
    out rather than derived from the launcher, whose kernels the Triton interpreter would run on the fake tensors."""
    B, N, D3 = qkv.shape
    return qkv.new_empty(B, N, D3 // 3)
