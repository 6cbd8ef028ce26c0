"""Traps of the fast GPU paths that a reading of the kernels found (issue 46), each shown on the CPU:

1. The self-check judges a fast path in the dtype it computes in: under autocast over fp32 weights (mmengine's AMP,
   the bf16 distillation step) L's Triton path is judged at bf16's tolerance and keeps running (it was judged at
   fp32's and sent back to the torch path for the process); a path that did fall back is reported as ``'torch'`` by
   every report of which path ran (they read the verdicts, not only the choice).
2. W's fp32 products (the prefix keys' scores and their log-sum-exp merge) stay fp32 under autocast.
3. L's Triton kernels address images past 2**31 elements (64-bit batch offsets): a batch of ViT-B at 1024x2048
   passes it at 114 images.
4. W's compiled Flex stays compiled past dynamo's recompile limit (8 variants of one function): 10 grid sizes in
   one process, and no ``[B, H, Q, KV]`` score tensor of eager Flex is made.
5. The self-check probes at the caller's shape, so a compiled path compiles once for the probe and the call.
6. The device check's kernel cases include the production shape (a 64x128 grid, ViT-B's 12 heads of 64) for L's
   Triton kernels and W's Flex, forward and backward, in bf16; L's Q pass there takes its 128-token whole-row tiles
   with 8 warps, and the interpreter runs that tiling at ViT-B's width.

The Triton cases run in one fresh interpreter with ``TRITON_INTERPRET=1`` (a 64-bit offset fault would end it).
"""
import warnings

import pytest
import torch
import torch._dynamo

from jetvit_mm.benchmark import kernel_check
from jetvit_mm.benchmark.distill_kernels import resolved_paths
from jetvit_mm.models.mixers import LinearAttention, WindowAttention
from jetvit_mm.models.mixers import linear as linear_module
from jetvit_mm.models.mixers.kernels import selfcheck
from jetvit_mm.models.mixers.kernels.availability import compile_available
from jetvit_mm.process_state import reset_caches

from .interpreted import interpreted, report_cases

BF16_EPS = torch.finfo(torch.bfloat16).eps
needs_compile = pytest.mark.skipif(not compile_available('cpu'), reason='torch.compile needs a C++ compiler')


@pytest.fixture
def fresh():
    reset_caches()
    torch._dynamo.reset()
    yield
    reset_caches()
    torch._dynamo.reset()


def mixer_pair(cls, kernel: str, dim: int = 32, heads: int = 2, **options):
    """``cls`` on the torch path with random non-trivial weights, and the same weights on ``kernel``."""
    g = torch.Generator().manual_seed(0)
    reference = cls(dim, heads, num_prefix_tokens=5, kernel='torch', **options).eval()
    with torch.no_grad():
        for p in reference.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    fast = cls(dim, heads, num_prefix_tokens=5, kernel=kernel, **options).eval()
    fast.load_state_dict(reference.state_dict())
    return reference, fast


def tokens(grid, batch: int = 2, dim: int = 32, prefix: int = 5) -> torch.Tensor:
    return torch.randn(batch, prefix + grid[0] * grid[1], dim, generator=torch.Generator().manual_seed(1))


# ----------------------------------------------------------------------------- the Triton cases (interpreter)

def autocast_linear_case(train: bool) -> None:
    """L on 'triton' under autocast(bf16) over fp32 weights: no fallback, the verdict is bf16's, the path that ran
    is 'triton', and the result is within bf16 rounding of the fp32 torch path."""
    reference, fast = mixer_pair(LinearAttention, 'triton', conv='squeeze')
    grid = (4, 6)
    x = tokens(grid)
    with warnings.catch_warnings():
        warnings.filterwarnings('error', message='jetvit_mm: the fast kernel')
        if train:
            out_grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(2))
            grads = []
            for mixer in (fast, reference):
                leaf = x.clone().requires_grad_()
                with torch.autocast('cpu', dtype=torch.bfloat16):
                    out = mixer(leaf, grid)
                out.float().backward(out_grad)
                grads.append(leaf.grad)
            fast_value, ref_value = grads
        else:
            with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
                fast_value = fast(x, grid).float()
            with torch.no_grad():
                ref_value = reference(x, grid)
    assert selfcheck.paths_run(fast) == [('triton', train)], fast._kernel_paths
    verdicts = {('triton', 'cpu', torch.bfloat16): True}
    if train:
        verdicts[('triton backward', 'cpu', torch.bfloat16)] = True
    assert selfcheck.VERDICTS == verdicts
    scale = ref_value.abs().max().item()
    assert (fast_value - ref_value).abs().max().item() <= 8 * BF16_EPS * scale


def int64_offsets_case(backward: bool) -> None:
    """The kernels on a batch whose third image starts past 2**31 elements of its buffer (a lazily mapped one: only
    the images' rows are touched): the batch stride fits 32 bits, the offset of image 2 does not."""
    from jetvit_mm.models.mixers.kernels.linear_fused import fused_linear_attention, rotation_table
    from jetvit_mm.models.mixers.kernels.linear_triton import launch_linear_attention
    from jetvit_mm.models.mixers.kernels.linear_triton_bwd import linear_attention_backward

    batch, grid, prefix, heads, head_dim = 3, (4, 6), 5, 2, 16
    n, dim = prefix + grid[0] * grid[1], heads * head_dim
    stride_b = 2 ** 30 + 3 * dim
    big = torch.empty(2 * stride_b + n * 3 * dim, dtype=torch.bfloat16)  # 4 GiB of address space, untouched
    qkv = big.as_strided((batch, n, 3 * dim), (stride_b, 3 * dim, 1))
    g = torch.Generator().manual_seed(0)
    for b in range(batch):
        qkv[b].copy_(torch.randn(n, 3 * dim, generator=g))
    table = rotation_table(torch.randn(grid[0] * grid[1], 2 * head_dim, generator=g), prefix, True, torch.float32)
    dense = qkv.contiguous().float().requires_grad_()
    ref = fused_linear_attention(dense, table, None, heads, prefix, 1e-6)
    if not backward:
        out = launch_linear_attention(qkv, table, None, None, (None, None, None), heads, prefix, 1e-6, None, True,
                                      grid)[0]
        assert (out.float() - ref).abs().max().item() <= 4 * BF16_EPS * ref.abs().max().item()
        return
    grad = torch.randn(ref.shape, generator=g)
    (expected,) = torch.autograd.grad(ref, dense, grad)
    found = linear_attention_backward(qkv, table, grad.bfloat16(), heads, 1e-6).float()
    assert (found - expected).abs().max().item() <= 16 * BF16_EPS * expected.abs().max().item()


def production_tiles_case() -> None:
    """L's Triton kernels at the production tiling: grid rows of 128 patches with DINOv3's 5 prefix tokens, heads of
    64 (ViT-B's), the squeeze conv in the kernel: the Q pass's 128-token whole-row tiles (8 warps on a GPU) against
    the torch path, in bf16. The tiles depend on the row's width and the head's, not on the number of rows or heads:
    16 rows and 2 heads keep the interpreter's run short."""
    reference, fast = mixer_pair(LinearAttention, 'triton', dim=128, heads=2, conv='squeeze')
    grid = (16, 128)
    x = tokens(grid, batch=1, dim=128).bfloat16()
    with torch.no_grad():
        ref = reference(x.float(), grid)
        out = fast.bfloat16()(x, grid).float()
    assert selfcheck.paths_run(fast) == [('triton', False)]
    assert (out - ref).abs().max().item() <= 8 * BF16_EPS * ref.abs().max().item()


TRITON_CASES = {
    'autocast-L-forward': lambda: autocast_linear_case(train=False),
    'autocast-L-training': lambda: autocast_linear_case(train=True),
    'int64-offsets-forward': lambda: int64_offsets_case(backward=False),
    'int64-offsets-backward': lambda: int64_offsets_case(backward=True),
    'production-tiles-L': production_tiles_case,
}


@pytest.fixture(scope='module')
def triton_results():
    return interpreted('test_fast_path_traps')


@pytest.mark.integration
@pytest.mark.parametrize('case', list(TRITON_CASES))
def test_triton_trap_cases(triton_results, case):
    assert triton_results[case] is None, triton_results[case]


# ----------------------------------------------------------------------------- 1: the verdicts are what is reported

def test_a_path_sent_back_by_its_self_check_is_reported_as_the_torch_path(monkeypatch, fresh):
    """What reports the path that ran (the kernel check, the distillation benchmark) reads the verdicts: a fast path
    that fell back is 'torch' there, not the path that was chosen."""
    monkeypatch.setattr(linear_module, 'compiled', lambda fn, shape=None: fn)
    monkeypatch.setattr(linear_module, 'fused_linear_attention', lambda qkv, *args: qkv[..., :qkv.shape[-1] // 3] * 0)
    _, fast = mixer_pair(LinearAttention, 'compile', conv='none')
    with pytest.warns(RuntimeWarning, match="'compile' failed its self-check"), torch.no_grad():
        fast(tokens((3, 4)), (3, 4))
    assert list(fast._kernel_paths.values()) == ['compile']  # chosen
    assert kernel_check.mixer_paths(fast) == [('L', 'torch', False)]  # ran
    # the distillation benchmark reports the paths taken with grad: one chosen whose backward's verdict failed
    fast._kernel_paths[('triton', torch.device('cpu'), torch.float32, True, False)] = 'triton'
    selfcheck.VERDICTS[('triton backward', 'cpu', torch.float32)] = False
    assert resolved_paths(fast) == {'L': ['torch'], 'W': []}
    selfcheck.VERDICTS.clear()  # forced on purpose: not a failure of this test's kernels


@needs_compile
@pytest.mark.parametrize('cls,options', [(LinearAttention, dict(conv='squeeze')), (WindowAttention,
                                                                                   dict(window_size=4))])
def test_under_autocast_the_verdict_is_the_computing_dtypes(fresh, cls, options):
    """Over fp32 weights under autocast(bf16) the qkv, and the fast path, are bf16: its verdict is bf16's."""
    _, fast = mixer_pair(cls, 'compile', **options)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        fast(tokens((5, 6)), (5, 6))
    assert selfcheck.VERDICTS == {('compile', 'cpu', torch.bfloat16): True}
    assert selfcheck.paths_run(fast) == [('compile', False)]


# ----------------------------------------------------------------------------- 2: W's fp32 products under autocast

@pytest.mark.parametrize('prefix', [1, 5])
def test_w_flex_keeps_its_fp32_products_fp32_under_autocast(monkeypatch, prefix):
    """The GPU formulation of W's Flex path (the prefix keys merged by log-sum-exp; Flex run eagerly here) on bf16
    qkv gives the same bits under autocast as without: its fp32 scores and merge are not turned into bf16 matmuls."""
    from jetvit_mm.models.mixers.kernels import window_flex
    from jetvit_mm.models.mixers.kernels.window_flex import flex_window_attention as flex_fn

    monkeypatch.setattr(window_flex, 'NO_LSE', ())
    monkeypatch.setattr(window_flex, '_CACHE', {})
    grid, window = (5, 7), (3, 3)
    layout = window_flex.window_block_mask(grid, window, prefix, 'cpu'), window_flex.window_token_orders(grid, window,
                                                                                                          'cpu')
    qkv = torch.randn(2, prefix + 35, 96, generator=torch.Generator().manual_seed(0)).bfloat16()
    args = (grid, window, 2, prefix, None, True)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.filterwarnings('ignore', message='flex_attention called without torch.compile')
        plain = flex_fn(qkv, *args, *layout)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            under_autocast = flex_fn(qkv, *args, *layout)
    assert torch.equal(plain, under_autocast)


# ----------------------------------------------------------------------------- 4, 5: compiled once, past the limit

def eager_flex_scores(profile, batch: int, heads: int, grids, window: int, prefix: int):
    """The ``[B, H, Q, KV]`` score shapes of eager Flex (Q the window-major slots, KV the slots and the prefix keys
    on the CPU) among the profiled operations' inputs."""
    from jetvit_mm.models.mixers.kernels.window_flex import _layout

    scores = set()
    for grid in grids:
        nh, nw, slots = _layout(grid, (min(window, grid[0]), min(window, grid[1])))
        scores.add((batch, heads, nh * nw * slots, nh * nw * slots + prefix))
    return sorted({tuple(shape) for event in profile.events() for shape in event.input_shapes
                   if tuple(shape) in scores})


@needs_compile
@pytest.mark.integration
def test_w_flex_stays_compiled_for_ten_grid_sizes_in_one_process(fresh, caplog):
    """Past dynamo's recompile limit (8 variants per function) a compiled function ran eagerly, with one warning: for
    Flex that is its dense form. Ten grid sizes in one process: no recompile-limit warning, no eager-Flex warning, no
    score tensor, each result the torch path's."""
    reference, fast = mixer_pair(WindowAttention, 'flex', window_size=4)
    grids = [(4, 4 + i) for i in range(10)]
    outputs = []
    with warnings.catch_warnings(record=True) as caught, torch.profiler.profile(record_shapes=True) as prof, \
            torch.no_grad():
        warnings.simplefilter('always')
        for grid in grids:
            outputs.append((fast(tokens(grid), grid), reference(tokens(grid), grid)))
    assert not [str(w.message) for w in caught if 'without torch.compile' in str(w.message)]
    assert 'recompile_limit' not in caplog.text
    assert eager_flex_scores(prof, 2, 2, grids, 4, 5) == []
    for out, ref in outputs:
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5 * ref.abs().max().item())
    assert selfcheck.paths_run(fast) == [('flex', False)]


@needs_compile
@pytest.mark.parametrize('cls,kernel,options', [(WindowAttention, 'flex', dict(window_size=4)),
                                                (WindowAttention, 'compile', dict(window_size=4)),
                                                (LinearAttention, 'compile', dict(conv='squeeze'))])
def test_the_self_check_compiles_nothing_the_call_does_not(fresh, cls, kernel, options):
    """A fast path's first call (self-check included) compiles one graph per function: the probe has the call's
    shape, so both run the same compiled function (the W probe compiled a second Flex at a 17x19 grid, 10-25 s of
    every cold GPU phase)."""
    from torch._dynamo.utils import counters

    _, fast = mixer_pair(cls, kernel, **options)
    grid = (20, 24)  # larger than the old probe's grid
    counters.clear()
    with torch.no_grad():
        fast(tokens(grid, batch=1), grid)
    assert selfcheck.VERDICTS == {(kernel, 'cpu', torch.float32): True}
    expected = 2 if options.get('conv') == 'squeeze' else 1  # L: its core and the squeeze conv's function
    assert counters['stats']['unique_graphs'] == expected


# ----------------------------------------------------------------------------- 6: the production shape is a case

def test_the_device_checks_first_cases_run_the_production_shape(monkeypatch):
    """The device check's first kernel cases: L 'triton' and W 'flex' at a 64x128 grid with ViT-B's heads, bf16,
    forward and backward, then the 2F model's forward, gradient and autocast training step; L's Q pass takes its
    whole-row tiles of 128 tokens there (8 warps on a GPU)."""
    from jetvit_mm.models.mixers.kernels.linear_triton import q_tiles

    monkeypatch.setattr(kernel_check, 'available_kernels', lambda names, device_type: names)  # as on a GPU
    found = kernel_check.production_cases('cuda')
    assert [(c.mixer, c.kernel, c.grad, c.autocast) for c in found] == [
        ('L', 'triton', False, False), ('L', 'triton', True, False), ('W', 'flex', False, False),
        ('W', 'flex', True, False), ('model', 'auto', False, False), ('model', 'auto', True, False),
        ('model', 'auto', True, True)]
    assert all(c.dtype == 'bf16' for c in found)
    assert all((c.grid, c.heads, c.head_dim, c.prefix, c.batch) == ((64, 128), 12, 64, 5, 1) for c in found[:4])
    assert q_tiles(5 + 64 * 128, 5, (64, 128), depthwise=True) == (128, 65, True)


if __name__ == '__main__':  # the Triton cases, run by ``triton_results`` under TRITON_INTERPRET=1
    report_cases(TRITON_CASES, before=reset_caches)
