"""The mixers' fast paths (issue 20) equal the torch reference, and the switch behind them.

- the fused L formulation (what torch.compile and the Triton kernels compute) against ``linear_attention`` + conv,
  for every option at once: batch 1 and 3, prefix 1 and 5, RoPE on and off (and in the numerator only or not at
  all), conv squeeze / static / none, focusing, both RoPE conventions;
- the Triton L kernels under ``TRITON_INTERPRET=1`` on CPU tensors, a grid whose token count divides neither the
  window nor the kernels' 64-token tile, with several tiles and token splits;
- ``kernel='compile'`` for L and W, ``'flex'`` for W (FlexAttention, compiled on the CPU);
- W ``'flex'`` as it runs on GPUs (the prefix keys merged by Flex's log-sum-exp), forward and backward on the CPU;
- fp32 to 1e-5 relative; bf16 within bf16 rounding of the fp32 result (no further from it than the torch path's
  own bf16 output, up to one bf16 spacing at the output's scale);
- ``'auto'``, training (the torch path whenever autograd records), clear errors for unknown and unavailable paths.
"""
import json
import os
import subprocess
import sys
import traceback
import warnings
from typing import Optional, Tuple

import pytest
import torch
import torch._dynamo
from timm.layers import RotaryEmbeddingDinoV3

from jetvit_mm.models.arch import mixer_table_of
from jetvit_mm.models.mixers import LinearAttention, WindowAttention, build_mixer, default_mixers
from jetvit_mm.models.mixers.kernels import (
    AUTO_COMPILE_MIN_ELEMENTS,
    available_kernels,
    fused_linear_attention,
    rotation_table,
    select_linear_kernel,
    select_window_kernel,
)
from jetvit_mm.models.mixers.kernels.availability import compile_available

from .conftest import HANG_GUARD_S, REPO

DIM, HEADS = 32, 2
BF16_EPS = torch.finfo(torch.bfloat16).eps  # 2 ** -7: bf16's spacing at 1; one rounding moves a value by half of it


def rope_for(grid: Tuple[int, int], head_dim: int, rotate_half: bool = True) -> torch.Tensor:
    return RotaryEmbeddingDinoV3(head_dim, temperature=100, rotate_half=rotate_half).get_embed(shape=grid)


def tokens(grid: Tuple[int, int], batch: int, prefix: int, dim: int = DIM, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, prefix + grid[0] * grid[1], dim, generator=g)


def randomize_(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Random non-trivial values for every parameter (incl. zero-initialised conv generators), eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return module.eval()


def twin(mixer: torch.nn.Module, kernel: str) -> torch.nn.Module:
    """The same mixer (same weights) on another path."""
    other = type(mixer)(**{**mixer.init_args, 'kernel': kernel})
    other.load_state_dict(mixer.state_dict())
    return other.eval()


def linear(prefix: int, kernel: str = 'torch', dim: int = DIM, heads: int = HEADS, rotate_half: bool = True,
           **cfg) -> LinearAttention:
    mixer = build_mixer('L', dim, heads, num_prefix_tokens=prefix, rotate_half=rotate_half,
                        mixers=default_mixers(L=dict(cfg, kernel=kernel)))
    mixer.init_args = dict(dim=dim, num_heads=heads, num_prefix_tokens=prefix, rotate_half=rotate_half, **cfg)
    return randomize_(mixer)


def window(prefix: int, window_size: int, kernel: str = 'torch') -> WindowAttention:
    mixer = build_mixer('W', DIM, HEADS, num_prefix_tokens=prefix,
                        mixers=default_mixers(W=dict(window_size=window_size, kernel=kernel)))
    mixer.init_args = dict(dim=DIM, num_heads=HEADS, num_prefix_tokens=prefix, window_size=window_size)
    return randomize_(mixer)


def assert_fp32_close(out: torch.Tensor, ref: torch.Tensor) -> None:
    """fp32: 1e-5 relative, elementwise, with the output's scale as the floor of 'relative'."""
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5 * ref.abs().max().item())


def assert_within_bf16_rounding(fast: torch.Tensor, torch_bf16: torch.Tensor, ref_fp32: torch.Tensor) -> None:
    """A bf16 fast path is no further from the fp32 result than the torch path's own bf16 output, up to one bf16
    spacing at the output's scale, and its error is that of bf16 (a few spacings, not a wrong computation)."""
    scale = ref_fp32.abs().max().item()
    fast_err = (fast.float() - ref_fp32).abs().max().item()
    torch_err = (torch_bf16.float() - ref_fp32).abs().max().item()
    assert fast.dtype == torch.bfloat16
    assert fast_err <= torch_err + BF16_EPS * scale, (fast_err, torch_err, scale)
    assert fast_err <= 4 * BF16_EPS * scale, (fast_err, scale)


def run(mixer: torch.nn.Module, x: torch.Tensor, grid: Tuple[int, int], rope: Optional[torch.Tensor]):
    with torch.inference_mode():
        return mixer(x, grid, rope)


@pytest.fixture
def fresh_dynamo():
    """Each compile test starts from empty dynamo caches, so none runs past the recompile limit (uncompiled)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


needs_compile = pytest.mark.skipif(not compile_available('cpu'), reason='torch.compile needs a C++ compiler')


# ----------------------------------------------------------------------------- the fused L formulation

def torch_core(mixer: LinearAttention, x: torch.Tensor, grid, rope) -> torch.Tensor:
    """The torch path's output before ``proj`` (its own ``linear_attention`` and conv)."""
    B, N, D = x.shape
    P = mixer.num_prefix_tokens
    qkv = mixer.qkv(x).reshape(B, N, 3, mixer.num_heads, mixer.head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    out = mixer.linear_attention(q, k, v, rope).transpose(1, 2).reshape(B, N, D).to(x.dtype)
    if mixer.conv is not None:
        out[:, P:] += mixer.value_conv(qkv[:, :, 2].flatten(2), grid)
    return out


def fused_core(mixer: LinearAttention, x: torch.Tensor, grid, rope) -> torch.Tensor:
    B, N, _ = x.shape
    P = mixer.num_prefix_tokens
    qkv = mixer.qkv(x)
    table = rotation_table(rope, P, mixer.rotate_half) if rope is not None and mixer.rope_numerator else None
    conv = mixer.value_conv(qkv[..., 2 * (qkv.shape[-1] // 3):], grid) if mixer.conv else None
    return fused_linear_attention(qkv, table, conv, mixer.num_heads, P, mixer.eps, mixer.focusing, mixer.rotate_half)


@pytest.mark.parametrize('batch', [1, 3])
@pytest.mark.parametrize('prefix', [1, 5])
@pytest.mark.parametrize('rope_mode', ['none', 'numerator', 'off'])
@pytest.mark.parametrize('conv', ['squeeze', 'static', 'none'])
@pytest.mark.parametrize('focusing', [None, 3.0], ids=['relu', 'focus3'])
def test_fused_formulation_equals_torch_core(batch, prefix, rope_mode, conv, focusing):
    grid = (5, 7)
    mixer = linear(prefix, conv=conv, focusing=focusing, rope_numerator=rope_mode != 'off')
    x = tokens(grid, batch, prefix)
    rope = None if rope_mode == 'none' else rope_for(grid, DIM // HEADS)
    with torch.no_grad():
        assert_fp32_close(fused_core(mixer, x, grid, rope), torch_core(mixer, x, grid, rope))


@pytest.mark.parametrize('rotate_half', [True, False], ids=['rotate_half', 'interleaved'])
def test_fused_formulation_follows_both_rope_conventions(rotate_half):
    grid = (4, 6)
    mixer = linear(5, conv='none', rotate_half=rotate_half)
    x, rope = tokens(grid, 2, 5), rope_for(grid, DIM // HEADS, rotate_half)
    with torch.no_grad():
        expected = torch_core(mixer, x, grid, rope)
        assert_fp32_close(fused_core(mixer, x, grid, rope), expected)
        assert (expected - torch_core(mixer, x, grid, None)).abs().max() > 1e-3  # RoPE changes the result


@pytest.mark.parametrize('conv', ['squeeze', 'none'])
@pytest.mark.parametrize('focusing', [None, 3.0], ids=['relu', 'focus3'])
def test_fused_formulation_bf16_within_bf16_rounding(conv, focusing):
    grid = (5, 7)
    mixer = linear(5, conv=conv, focusing=focusing)
    x, rope = tokens(grid, 3, 5).bfloat16().float(), rope_for(grid, DIM // HEADS)
    with torch.no_grad():
        ref = torch_core(mixer, x, grid, rope)
        mixer.bfloat16()
        xb = x.bfloat16()
        assert_within_bf16_rounding(fused_core(mixer, xb, grid, rope), torch_core(mixer, xb, grid, rope), ref)


# ----------------------------------------------------------------------------- Triton kernels, interpreted

# Triton's interpreter must be on before anything imports triton (timm does, and with it this file), so the cases
# run in one fresh interpreter process (``python -m tests.test_fast_mixers``, below) and each test reads its result.
TRITON_GRID = (9, 17)  # 158 / 154 tokens: three 64-token tiles (the last partial), split in two partial sums
TRITON_CASES = {
    f'b{batch}-p{prefix}-rope_{rope_mode}-{conv}-{"focus3" if focusing else "relu"}':
        dict(batch=batch, prefix=prefix, rope_mode=rope_mode, conv=conv, focusing=focusing)
    for batch in (1, 3) for prefix in (1, 5) for rope_mode in ('none', 'numerator', 'off')
    for conv in ('squeeze', 'static', 'none') for focusing in (None, 3.0)
}
TRITON_CASES.update({  # head dims (24: not a power of two, the kernels mask the padded columns), RoPE conventions
    f'head_dim{head_dim}-{"rotate_half" if rotate_half else "interleaved"}':
        dict(batch=2, prefix=5, rope_mode='numerator', conv='static', focusing=None, head_dim=head_dim,
             rotate_half=rotate_half)
    for head_dim in (16, 24, 32) for rotate_half in (True, False)
})
# the squeeze generator's launch over several chunks of D (200 > 64), hidden rows (25) and programs (1800 > 1024 rows)
TRITON_CASES['head_dim100-squeeze'] = dict(batch=2, prefix=5, rope_mode='numerator', conv='squeeze', focusing=None,
                                           head_dim=100)
TRITON_CASES.update({  # the Q pass with one grid row per program (16 wide: no idle lane; 13 wide: 3 of 16 idle)
    f'row_tiles-{grid[0]}x{grid[1]}-p{prefix}-{conv}':
        dict(batch=2, prefix=prefix, rope_mode='numerator', conv=conv, focusing=None, grid=grid)
    for grid in ((5, 16), (4, 13)) for prefix in (0, 5) for conv in ('squeeze', 'static')
})
TRITON_CASES['row_tiles-bf16'] = dict(batch=2, prefix=5, rope_mode='numerator', conv='squeeze', focusing=None,
                                      dtype='bf16', grid=(4, 13))
TRITON_CASES.update({  # bf16 within bf16 rounding; fp16 on an fp32 core
    f'{dtype}-{"focus3" if focusing else "relu"}':
        dict(batch=2, prefix=5, rope_mode='numerator', conv='squeeze', focusing=focusing, dtype=dtype)
    for dtype in ('bf16', 'fp16') for focusing in (None, 3.0)
})


def triton_case(batch: int, prefix: int, rope_mode: str, conv: str, focusing: Optional[float], head_dim: int = 16,
                rotate_half: bool = True, dtype: str = 'fp32', grid: Tuple[int, int] = TRITON_GRID) -> None:
    """One case: the mixer with ``kernel='triton'`` against the same mixer on the torch path."""
    dim = HEADS * head_dim
    mixer = linear(prefix, dim=dim, conv=conv, focusing=focusing, rope_numerator=rope_mode != 'off',
                   rotate_half=rotate_half)
    fast = twin(mixer, 'triton')
    x = tokens(grid, batch, prefix, dim).bfloat16().float()
    rope = None if rope_mode == 'none' else rope_for(grid, head_dim, rotate_half)
    ref = run(mixer, x, grid, rope)
    if dtype == 'fp32':
        assert_fp32_close(run(fast, x, grid, rope), ref)
    elif dtype == 'bf16':
        assert_within_bf16_rounding(run(fast.bfloat16(), x.bfloat16(), grid, rope),
                                    run(mixer.bfloat16(), x.bfloat16(), grid, rope), ref)
    else:
        out = run(fast.half(), x.half(), grid, rope)
        assert out.dtype == torch.float16
        torch.testing.assert_close(out.float(), run(mixer.half(), x.half(), grid, rope).float(),
                                   rtol=2e-3, atol=2e-3 * ref.abs().max().item())


@pytest.fixture(scope='module')
def triton_results():
    pytest.importorskip('triton')
    proc = subprocess.run([sys.executable, '-m', 'tests.test_fast_mixers'], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, TRITON_INTERPRET='1'), timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize('case', list(TRITON_CASES))
@pytest.mark.integration
def test_triton_kernels_equal_torch_path(triton_results, case):
    assert triton_results[case] is None, triton_results[case]


def test_triton_path_needs_cuda_or_the_interpreter(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    mixer = twin(linear(5), 'triton')
    grid = (3, 4)
    with pytest.raises(RuntimeError, match=r"linear_cfg.kernel='triton' is not available for cpu tensors here: it "
                                           r"needs Triton and a CUDA device .*; available on cpu: 'torch'"):
        run(mixer, tokens(grid, 1, 5), grid, None)


# ----------------------------------------------------------------------------- compiled L, compiled / flex W

@needs_compile
@pytest.mark.parametrize('batch,prefix,rope_mode,conv,focusing', [
    (1, 5, 'numerator', 'squeeze', None),
    (3, 1, 'none', 'static', None),
    (3, 5, 'off', 'none', 3.0),
])
def test_compiled_linear_equals_torch_path(fresh_dynamo, batch, prefix, rope_mode, conv, focusing):
    grid = (5, 7)
    mixer = linear(prefix, conv=conv, focusing=focusing, rope_numerator=rope_mode != 'off')
    x = tokens(grid, batch, prefix)
    rope = None if rope_mode == 'none' else rope_for(grid, DIM // HEADS)
    assert_fp32_close(run(twin(mixer, 'compile'), x, grid, rope), run(mixer, x, grid, rope))


@needs_compile
def test_compiled_linear_bf16_within_bf16_rounding(fresh_dynamo):
    grid = (5, 7)
    mixer = linear(5, conv='squeeze')
    x, rope = tokens(grid, 3, 5).bfloat16().float(), rope_for(grid, DIM // HEADS)
    ref = run(mixer, x, grid, rope)
    fast = twin(mixer, 'compile').bfloat16()
    assert_within_bf16_rounding(run(fast, x.bfloat16(), grid, rope), run(mixer.bfloat16(), x.bfloat16(), grid, rope),
                                ref)


WINDOW_CASES = [  # (grid, window, prefix, batch, rope): grids the window does not divide, windows above the grid
    ((5, 7), 3, 5, 1, True),
    ((4, 9), 4, 1, 3, False),
    ((2, 3), 16, 5, 3, True),
    ((6, 6), 3, 0, 1, True),
]


@needs_compile
@pytest.mark.parametrize('kernel', ['compile', 'flex'])
@pytest.mark.parametrize('grid,window_size,prefix,batch,use_rope', WINDOW_CASES)
def test_fast_window_attention_equals_torch_path(fresh_dynamo, kernel, grid, window_size, prefix, batch, use_rope):
    mixer = window(prefix, window_size)
    x = tokens(grid, batch, prefix)
    rope = rope_for(grid, DIM // HEADS) if use_rope else None
    assert_fp32_close(run(twin(mixer, kernel), x, grid, rope), run(mixer, x, grid, rope))


@needs_compile
@pytest.mark.parametrize('kernel', ['compile', 'flex'])
def test_fast_window_attention_bf16_within_bf16_rounding(fresh_dynamo, kernel):
    grid = (5, 7)
    mixer = window(5, 3)
    x, rope = tokens(grid, 2, 5).bfloat16().float(), rope_for(grid, DIM // HEADS)
    ref = run(mixer, x, grid, rope)
    fast = twin(mixer, kernel).bfloat16()
    assert_within_bf16_rounding(run(fast, x.bfloat16(), grid, rope), run(mixer.bfloat16(), x.bfloat16(), grid, rope),
                                ref)


def dense_flex_attention(q, k, v, block_mask, return_aux=None):
    """FlexAttention's definition computed densely from the block mask's ``mask_mod``: the stand-in for its backward,
    which FlexAttention has only on GPUs."""
    from torch.nn.attention import flex_attention as flex

    queries, keys = block_mask.seq_lengths
    allowed = block_mask.mask_mod(None, None, torch.arange(queries)[:, None], torch.arange(keys)[None])
    scores = (q.float() @ k.float().mT * q.shape[-1] ** -0.5).masked_fill(~allowed, float('-inf'))
    out = (scores.softmax(-1) @ v.float()).to(q.dtype)
    return out if return_aux is None else (out, flex.AuxOutput(lse=scores.logsumexp(-1)))


@needs_compile
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16], ids=['fp32', 'bf16'])
@pytest.mark.parametrize('grid,window_size,prefix,batch,use_rope', WINDOW_CASES)
def test_flex_window_attention_merging_the_prefix_keys_by_lse_equals_torch_path(monkeypatch, dtype, grid, window_size,
                                                                               prefix, batch, use_rope):
    """The GPU's formulation of the 'flex' path (the prefix keys out of Flex, merged by its log-sum-exp, which the
    CPU's compiled Flex does not return) on the CPU: Flex run eagerly, forward; then with Flex's dense definition in
    its place (no Flex backward on the CPU), the backward of all around it, against the torch path's."""
    from torch.nn.attention import flex_attention as flex

    from jetvit_mm.models.mixers.kernels import window_flex
    from jetvit_mm.models.mixers.kernels.window_flex import flex_window_attention as flex_fn
    from jetvit_mm.models.mixers.kernels.window_flex import window_block_mask, window_token_orders
    from jetvit_mm.models.mixers.window import window_attention

    monkeypatch.setattr(window_flex, 'NO_LSE', ())  # the CPU as a GPU: no prefix keys in Flex's key buffer
    window = (min(window_size, grid[0]), min(window_size, grid[1]))
    layout = window_block_mask(grid, window, prefix, 'cpu'), window_token_orders(grid, window, 'cpu')
    assert layout[0].seq_lengths[0] == layout[0].seq_lengths[1]
    qkv = torch.randn(batch, prefix + grid[0] * grid[1], 3 * DIM, generator=torch.Generator().manual_seed(0))
    rope = rope_for(grid, DIM // HEADS) if use_rope else None
    args = (grid, window, HEADS, prefix, rope, True)
    ref = window_attention(qkv, *args)
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message='flex_attention called without torch.compile')
        with torch.no_grad():
            out = flex_fn(qkv.to(dtype), *args, *layout)
    if dtype == torch.float32:
        assert_fp32_close(out, ref)
    else:
        assert_within_bf16_rounding(out, window_attention(qkv.bfloat16(), *args), ref)

    monkeypatch.setattr(flex, 'flex_attention', dense_flex_attention)
    grad_out = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1))
    grads = {}
    for name, fn, x in (('flex', lambda x: flex_fn(x, *args, *layout), qkv.to(dtype)),
                        ('torch', lambda x: window_attention(x, *args), qkv.to(dtype)),
                        ('fp32', lambda x: window_attention(x, *args), qkv)):
        x = x.clone().requires_grad_()
        fn(x).backward(grad_out.to(x.dtype))
        grads[name] = x.grad.float()
    if dtype == torch.float32:
        assert_fp32_close(grads['flex'], grads['torch'])
    else:  # no further from the fp32 gradient than the torch path's bf16 one, up to one spacing at its scale
        scale = grads['fp32'].abs().max().item()
        fast_err, torch_err = ((grads[k] - grads['fp32']).abs().max().item() for k in ('flex', 'torch'))
        assert fast_err <= torch_err + BF16_EPS * scale, (fast_err, torch_err, scale)



@pytest.mark.parametrize('grid, window, prefix_keys', [((5, 7), (3, 3), 5), ((4, 9), (4, 4), 0), ((2, 3), (2, 3), 5),
                                                       ((24, 20), (16, 12), 1), ((40, 40), (16, 16), 0)])
def test_the_window_block_mask_built_from_its_blocks_is_create_block_masks(grid, window, prefix_keys):
    """The block mask built from its blocks (index arithmetic, cheap enough to build inside a compiled graph) holds
    what ``create_block_mask`` finds by evaluating the mask at every query and key: per query block the same partial
    and full key blocks, and the same query-major copy for the backward."""
    from torch.nn.attention import flex_attention as flex

    from jetvit_mm.models.mixers.kernels.window_flex import _build_block_mask, _layout, window_mask_mod

    nh, nw, slots = _layout(grid, window)
    ours = _build_block_mask(grid, window, prefix_keys, torch.device('cpu'))
    theirs = flex.create_block_mask(window_mask_mod(grid, window), None, None, nh * nw * slots,
                                    nh * nw * slots + prefix_keys, device='cpu', BLOCK_SIZE=128)
    assert ours.seq_lengths == theirs.seq_lengths and ours.BLOCK_SIZE == theirs.BLOCK_SIZE
    for count, indices in (('kv_num_blocks', 'kv_indices'), ('full_kv_num_blocks', 'full_kv_indices'),
                           ('q_num_blocks', 'q_indices'), ('full_q_num_blocks', 'full_q_indices')):
        a, b = getattr(ours, count), getattr(theirs, count)
        assert torch.equal(a, b), count
        used = torch.arange(getattr(ours, indices).shape[-1]) < a[..., None]
        assert getattr(ours, indices).shape == getattr(theirs, indices).shape, indices
        for row_a, row_b, keep in zip(getattr(ours, indices).flatten(0, -2), getattr(theirs, indices).flatten(0, -2),
                                      used.flatten(0, -2)):
            assert sorted(row_a[keep].tolist()) == sorted(row_b[keep].tolist()), indices


@pytest.mark.parametrize('prefix', [0, 5])
@pytest.mark.parametrize('no_lse', [('cpu',), ()], ids=['cpu', 'gpu_formulation'])
def test_the_flex_path_compiles_to_one_graph_from_its_first_call(monkeypatch, fresh_dynamo, prefix, no_lse):
    """The 'flex' path's compiled function is one graph from the first call on, with every cache empty before it: its
    block mask and token orders are built outside and passed in. A lookup inside broke the graph on a first call,
    and the rotation, the padding and the window-major gather then each wrote their own copy of q, k and v."""
    from torch._dynamo.testing import CompileCounter

    from jetvit_mm.models.mixers import window as window_module
    from jetvit_mm.models.mixers.kernels import window_flex

    monkeypatch.setattr(window_flex, 'NO_LSE', no_lse)
    monkeypatch.setattr(window_flex, '_CACHE', {})
    counter, shapes = CompileCounter(), set()

    def compiled(fn, shape=None):
        graphs = torch.compile(fn, backend=counter, dynamic=False)
        return lambda qkv, *args: shapes.add(qkv.shape) or graphs(qkv, *args)

    monkeypatch.setattr(window_module, 'compiled', compiled)
    reference = window(prefix, 4)
    grid, fast = (6, 10), twin(reference, 'flex')
    x, rope = tokens(grid, 2, prefix), rope_for(grid, DIM // HEADS)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.filterwarnings('ignore', message='flex_attention called without torch.compile')
        out = fast(x, grid, rope)
    assert counter.frame_count == len(shapes), f'{counter.frame_count} graphs, {len(shapes)} input shapes'
    assert_fp32_close(out, run(reference, x, grid, rope))


@needs_compile
@pytest.mark.integration
def test_the_compiled_flex_path_leaves_the_prefix_queries_out_of_sdpa(fresh_dynamo):
    """Compiled by inductor (what the 'flex' path runs), the prefix queries' attention stays the products it is
    written as: no pattern rewrites it into a scaled_dot_product_attention call (on a GPU its kernels walk all keys
    with one program per head for these ~5 queries, what the products replaced). One graph, the result the torch
    path's."""
    from torch._inductor.utils import run_and_get_code

    from jetvit_mm.models.mixers.kernels.window_flex import flex_window_attention as flex_fn
    from jetvit_mm.models.mixers.kernels.window_flex import window_block_mask, window_token_orders
    from jetvit_mm.models.mixers.window import window_attention

    grid, window, prefix = (4, 6), (2, 3), 5
    qkv = tokens(grid, 1, prefix, 3 * DIM)
    args = (grid, window, HEADS, prefix, rope_for(grid, DIM // HEADS), True)
    layout = window_block_mask(grid, window, prefix, 'cpu'), window_token_orders(grid, window, 'cpu')
    with torch.no_grad():
        out, codes = run_and_get_code(torch.compile(flex_fn, dynamic=False), qkv, *args, *layout)
    assert len(codes) == 1
    assert 'scaled_dot_product' not in codes[0]
    assert_fp32_close(out, window_attention(qkv, *args))


def test_window_attention_operator_passes_torch_opcheck():
    """The custom operator both W attentions run in under torch.compile: its fake kernel (shapes, strides) and its
    registration agree with the real one (torch.library.opcheck), on window-major buffers as the W path builds."""
    from jetvit_mm.models.mixers.kernels.window_compiled import window_and_prefix_attention

    g = torch.Generator().manual_seed(0)
    B, H, windows, S, keys, C, P = 2, 2, 3, 4, 16, 8, 5
    q_win, q_prefix = torch.randn(B, H, windows, S, C, generator=g), torch.randn(B, H, P, C, generator=g)
    k_win, v_win = (torch.randn(B, H, windows, keys, C, generator=g) for _ in range(2))
    mask = torch.zeros(1, 1, 1, keys, dtype=torch.bool)
    mask[..., :P + S] = True
    prefix_mask = mask.expand(1, 1, windows, keys).clone()
    prefix_mask[:, :, 1:, :P] = False
    torch.library.opcheck(window_and_prefix_attention, (q_win, k_win, v_win, mask, q_prefix,
                                                        prefix_mask.reshape(1, 1, 1, windows * keys)))

# ----------------------------------------------------------------------------- the switch

def test_unknown_kernel_names_are_rejected_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown mixers.L.kernel 'cuda'; valid: 'auto', 'torch', 'compile', "
                                         r"'triton'"):
        build_mixer('F', DIM, HEADS, mixers=default_mixers(L=dict(kernel='cuda')))  # checked whatever the letter
    with pytest.raises(ValueError,
                       match=r"unknown mixers.W.kernel 'triton'; valid: 'auto', 'torch', 'compile', 'flex'"):
        build_mixer('L', DIM, HEADS, mixers=default_mixers(W=dict(kernel='triton')))


def test_auto_picks_by_device_and_size_and_training_always_takes_torch():
    cpu, big = torch.device('cpu'), AUTO_COMPILE_MIN_ELEMENTS
    compiles = 'compile' if compile_available('cpu') else 'torch'
    for select in (select_linear_kernel, select_window_kernel):
        assert select('auto', cpu, big, False) == compiles
        assert select('auto', cpu, big - 1, False) == 'torch'  # compiling would not pay off
        assert select('compile', cpu, 10, True) == 'torch'  # autograd records: the torch path
        assert select('torch', cpu, big, False) == 'torch'
        if not torch.cuda.is_available():  # no GPU: 'auto' falls back silently, by name it is an error
            assert select('auto', torch.device('cuda'), big, False) == 'torch'
            with pytest.raises(RuntimeError, match=r"is not available for cuda tensors here: .*available on cuda: "
                                                   r"'torch' \(or 'auto'\)"):
                select('compile', torch.device('cuda'), big, False)
    assert available_kernels(('auto', 'torch', 'compile', 'triton'), 'cpu') == ('torch',) + (
        ('compile',) if compile_available('cpu') else ())


@needs_compile
def test_training_runs_the_torch_path_whatever_the_kernel(fresh_dynamo):
    grid = (3, 4)
    reference = linear(5, conv='squeeze').train()
    fast = twin(reference, 'compile').train()
    x = tokens(grid, 2, 5).requires_grad_()
    rope = rope_for(grid, DIM // HEADS)
    out_ref, out_fast = reference(x, grid, rope), fast(x, grid, rope)
    assert torch.equal(out_ref, out_fast)  # bit for bit: the same (torch) path
    out_fast.square().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in fast.parameters())


@needs_compile
def test_flop_count_runs_the_torch_path_under_fake_tensors(fresh_dynamo):
    """Shape-only FLOP counting (FakeTensorMode) cannot run compiled or Triton code: the mixers take the torch path
    there, whatever the kernel, and count the same."""
    from jetvit_mm.benchmark.flops import count_flops
    from jetvit_mm.models import JetViT

    kw = dict(model_name='dinov3_vits16', arch='LWF', embed_dim=32, depth=3, num_heads=2,
              mixers=default_mixers(W=dict(window_size=2)))
    fast = JetViT(**dict(kw, mixers=default_mixers(W=dict(window_size=2, kernel='flex'),
                                                   L=dict(kernel='compile')))).eval()
    assert count_flops(fast, (64, 96)) == count_flops(JetViT(**kw).eval(), (64, 96))
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        assert select_linear_kernel('compile', torch.device('cpu'), 10, False) == 'torch'
        assert select_window_kernel('flex', torch.device('cpu'), 10, False) == 'torch'


def test_kernel_switches_are_deployment_options_not_what_a_layer_computes():
    saved = dict(mixers=default_mixers(W=dict(window_size=8, kernel='torch'), L=dict(conv='static', kernel='torch')))
    given = dict(mixers=default_mixers(W=dict(window_size=8, kernel='flex'), L=dict(conv='static', kernel='triton')))

    def spec(args):  # what the arch spec records of the L and W layers
        return mixer_table_of(args).spec_entries('LW')

    assert spec(saved) == spec(given)
    changed = spec(dict(mixers=default_mixers(W=dict(window_size=8), L=dict(conv='squeeze'))))
    assert changed['L']['conv'] == 'squeeze' and spec(saved)['L']['conv'] == 'static'
    assert {k: v for k, v in changed['L'].items() if k != 'conv'} == \
        {k: v for k, v in spec(saved)['L'].items() if k != 'conv'}


@pytest.mark.integration
def test_importing_the_package_builds_no_triton_kernel():
    code = ('import sys, jetvit_mm.models, jetvit_mm.models.mixers.kernels; '
            'assert "jetvit_mm.models.mixers.kernels.linear_triton_kernels" not in sys.modules')
    subprocess.run([sys.executable, '-c', code], check=True)


if __name__ == '__main__':  # the Triton cases, run by ``triton_results`` under TRITON_INTERPRET=1
    warnings.filterwarnings('error', message='jetvit_mm: the fast kernel')  # a fallback is a failure, not a pass
    results = {}
    for name, spec in TRITON_CASES.items():
        try:
            triton_case(**spec)
            results[name] = None
        except Exception:  # reported, with its traceback, by that case's test
            results[name] = traceback.format_exc()
    print(json.dumps(results))
