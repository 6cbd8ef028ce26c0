"""Every fast path of the efficient mixers against the torch path, on one device: the correctness phase of the GPU
check (``scripts/gpu_check.sh``), with the tolerances of the CPU tests (tests/test_fast_mixers.py): fp32 1e-5
relative, elementwise, the output's scale as the floor of 'relative'; bf16 no further from the fp32 result than the
torch path's own bf16 output, up to one bf16 spacing at the output's scale, and at most four spacings from it.

Cases (:func:`cases`, :func:`production_cases`): every fast path, axis by axis around one base case, and a whole 2F
model on ``'auto'``. Backward (``-grad`` cases): the input's gradient for one fixed output gradient, by the same rule
without the four-spacing cap (the bf16 qkv Linear's backward alone rounds it by several spacings). Pure torch + timm.

A case passes only if its fast path ran: each starts afresh (:func:`fresh_state`), and fails when a mixer resolved
another path (:func:`path_problems`), a self-check fell back to the torch path, dynamo logged a warning (its
recompile limit: the function then runs eagerly) or any warning but :data:`HARMLESS_WARNINGS` was raised. fp32 cases
run with TF32 off (:func:`tf32_off`).
"""
import contextlib
import copy
import functools
import logging
import time
import traceback
import warnings
from dataclasses import asdict, dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import nn

from jetvit_mm.dtypes import to_dtype
from jetvit_mm.models.mixers import LinearAttention, WindowAttention, default_mixers
from jetvit_mm.models.mixers.kernels import available_kernels, selfcheck
from jetvit_mm.process_state import reset_caches

BF16_EPS = torch.finfo(torch.bfloat16).eps
CONVS = ('squeeze', 'static', 'token', 'none')
ROPES = ('rotate_half', 'interleaved', 'none')
# warnings that say nothing about the path that ran (the first cuBLAS call of a backward thread; inductor's hint to
# turn on TF32, which the fp32 cases keep off on purpose)
HARMLESS_WARNINGS = ('no current CUDA context', 'TensorFloat32 tensor cores')
# the path 'auto' must resolve to per mixer and device type (absent: whatever 'auto' picks there, e.g. the torch path
# for the CPU dry run's tiny inputs)
AUTO_PATHS = {'cuda': {'L': 'triton', 'W': 'flex'}}


@dataclass
class Case:
    """One comparison: a mixer (``'L'`` / ``'W'`` / ``'model'``) on ``kernel`` against the torch path."""
    mixer: str
    kernel: str
    dtype: str
    prefix: int = 5
    batch: int = 1
    rope: str = 'rotate_half'
    conv: str = 'squeeze'
    grid: Tuple[int, int] = (9, 17)
    grad: bool = False  # compare the input's gradient (the backward kernels), not the output
    heads: int = 4
    head_dim: int = 16
    autocast: bool = False  # fp32 weights and input under torch.autocast(dtype) (mmengine's AMP, the bf16 step)

    @property
    def name(self) -> str:
        conv = f'-{self.conv}' if self.mixer == 'L' else ''
        width = f'-h{self.heads}x{self.head_dim}' if (self.heads, self.head_dim) != (4, 16) else ''
        return (f'{self.mixer}-{self.kernel}-{self.dtype}-p{self.prefix}-b{self.batch}-{self.rope}{conv}'
                f'-{self.grid[0]}x{self.grid[1]}{width}{"-autocast" if self.autocast else ""}'
                f'{"-grad" if self.grad else ""}')


# the shape the fast paths are deployed at: DINOv3-B at 1024x2048 (a 64x128 grid, 5 prefix tokens, 12 heads of 64);
# quick (the CPU dry run): a small grid, narrow heads
PRODUCTION = dict(grid=(64, 128), heads=12, head_dim=64, prefix=5, batch=1)
PRODUCTION_QUICK = dict(grid=(8, 16), heads=2, head_dim=16, prefix=5, batch=1)


def production_cases(device_type: str, quick: bool = False) -> List[Case]:
    """What settles the most in the fewest seconds (the device check's first phase), in bf16: each training kernel
    (the CPU's ``'compile'`` paths in their place, forward only) at :data:`PRODUCTION` forward and backward, then the
    2F model on ``'auto'``: forward, gradient, and the gradient of one training step under autocast."""
    shape = PRODUCTION_QUICK if quick else PRODUCTION
    found = []
    for mixer, names in (('L', ('torch', 'compile', 'triton')), ('W', ('torch', 'compile', 'flex'))):
        kernels = [k for k in available_kernels(names, device_type) if k != 'torch']
        trains = training_kernels(mixer, kernels, device_type)
        for kernel in trains or kernels[-1:]:
            found.append(Case(mixer, kernel, 'bf16', **shape))
            found += [Case(mixer, kernel, 'bf16', grad=True, **shape)] if kernel in trains else []
    model = dict(grid=(12, 20))
    return found + [Case('model', 'auto', 'bf16', **model), Case('model', 'auto', 'bf16', grad=True, **model),
                    Case('model', 'auto', 'bf16', grad=True, autocast=True, **model)]


def training_kernels(mixer: str, kernels: List[str], device_type: str) -> List[str]:
    """Which of ``kernels`` have a backward of their own on ``device_type`` (the others train on the torch path)."""
    trains = {'L': ('triton',), 'W': ('flex',) if device_type == 'cuda' else ()}[mixer]
    return [k for k in kernels if k in trains]


def grad_cases(mixer: str, kernel: str, dtype: str) -> Iterator[Case]:
    """The backward's cases of one training kernel: the base case and one change per axis (W: the base case and the
    batch of 3 on an even grid only; each of its cases compiles FlexAttention's backward, about 10 s)."""
    yield Case(mixer, kernel, dtype, grad=True)
    yield Case(mixer, kernel, dtype, batch=3, grid=(8, 12), grad=True)
    if mixer == 'W':
        return
    yield Case(mixer, kernel, dtype, prefix=0, grad=True)
    yield from (Case(mixer, kernel, dtype, rope=r, grad=True) for r in ROPES[1:])
    if mixer == 'L':
        yield Case(mixer, kernel, dtype, conv='static', grad=True)


def cases(device_type: str, dtypes=('fp32', 'bf16'), quick: bool = False, kernels: Optional[Sequence[str]] = None,
          fp32: str = 'all') -> Iterator[Case]:
    """The cases for the fast paths available on ``device_type``, dtype by dtype in the order given: every axis is
    varied around one base case (not the full product), and each dtype gets all of them. ``kernels`` keeps the named
    fast paths only (``'auto'``: the whole model); ``fp32='grad'`` keeps only the fp32 backward cases (the GPU check:
    the forward kernels' fp32 results follow from their bf16 ones, the backward's exactness does not). ``quick`` (the
    script's CPU dry run) keeps the whole model and one compiled L case per dtype."""
    if fp32 not in ('all', 'grad'):
        raise ValueError(f"fp32 must be 'all' or 'grad', got {fp32!r}")
    keep = lambda k: kernels is None or k in kernels  # noqa: E731
    linear = [k for k in available_kernels(('torch', 'compile', 'triton'), device_type) if k != 'torch' and keep(k)]
    window = [k for k in available_kernels(('torch', 'compile', 'flex'), device_type) if k != 'torch' and keep(k)]
    if quick:
        linear, window = [k for k in linear if k == 'compile'], []
    for dtype in dtypes:
        grad_only = dtype == 'fp32' and fp32 == 'grad'
        for mixer, kernels_here in (('L', linear), ('W', window)):
            if not grad_only:
                for kernel in kernels_here:
                    yield from _forward_cases(mixer, kernel, dtype, quick)
            for kernel in ([] if quick else training_kernels(mixer, kernels_here, device_type)):
                yield from grad_cases(mixer, kernel, dtype)
        if keep('auto'):
            if not grad_only:
                yield Case('model', 'auto', dtype, grid=(12, 20))
            yield Case('model', 'auto', dtype, grid=(12, 20), grad=True)


def _forward_cases(mixer: str, kernel: str, dtype: str, quick: bool) -> Iterator[Case]:
    """The forward's cases of one fast path: the base case and one change per axis (``quick``: the base case)."""
    yield Case(mixer, kernel, dtype)
    if quick:
        return
    yield from (Case(mixer, kernel, dtype, prefix=p) for p in (0, 1))
    yield Case(mixer, kernel, dtype, batch=3, grid=(8, 12))
    yield from (Case(mixer, kernel, dtype, rope=r) for r in ROPES[1:])
    if mixer == 'L':
        yield from (Case(mixer, kernel, dtype, conv=c) for c in CONVS[1:])


def randomize_(module: nn.Module, seed: int = 0) -> nn.Module:
    """Non-trivial values for every parameter (zero-initialised conv generators included), eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return module.eval()


def case_rope(grid: Tuple[int, int], head_dim: int, layout: str) -> Optional[torch.Tensor]:
    if layout == 'none':
        return None
    from timm.layers import RotaryEmbeddingDinoV3
    return RotaryEmbeddingDinoV3(head_dim, temperature=100, rotate_half=layout == 'rotate_half').get_embed(shape=grid)


def build_mixer_pair(case: Case) -> Tuple[nn.Module, nn.Module]:
    """The mixer on the torch path and the same weights on ``case.kernel``."""
    common = dict(dim=case.heads * case.head_dim, num_heads=case.heads, num_prefix_tokens=case.prefix,
                  rotate_half=case.rope != 'interleaved')
    if case.mixer == 'L':
        make = lambda kernel: LinearAttention(**common, conv=case.conv, kernel=kernel)  # noqa: E731
    else:
        make = lambda kernel: WindowAttention(**common, window_size=4, kernel=kernel)  # noqa: E731
    reference = randomize_(make('torch'))
    fast = make(case.kernel)
    fast.load_state_dict(reference.state_dict())
    return reference, fast.eval()


def set_kernels_(model: nn.Module, kernel: str) -> nn.Module:
    """Every L and W mixer of ``model`` on ``kernel``."""
    for module in model.modules():
        if isinstance(module, (LinearAttention, WindowAttention)):
            module.kernel = kernel
    return model


def build_model_pair(case: Case) -> Tuple[nn.Module, nn.Module]:
    """A tiny DINOv3-shaped 2F hybrid (L, W and F layers, RoPE, 4 registers) on the torch paths and on 'auto'."""
    from jetvit_mm.models.jetvit import JetViT
    reference = randomize_(JetViT('dinov3_vits16', arch='LWFLWF', embed_dim=64, depth=6, num_heads=4,
                                  mixers=default_mixers(W=dict(window_size=4))))
    with torch.no_grad():  # LayerScale near 1: every block visibly changes the output
        for name, p in reference.named_parameters():
            if name.endswith('gamma'):
                p.fill_(0.5)
    fast = set_kernels_(copy.deepcopy(reference), 'auto')
    return set_kernels_(reference, 'torch'), fast


def compare(out: torch.Tensor, torch_out: torch.Tensor, ref_fp32: torch.Tensor, dtype: str,
            spacings: Optional[int] = 4, out_dtype: Optional[torch.dtype] = None) -> Dict[str, float]:
    """The tolerance rule of the module docstring: error, bound, pass (bf16: at most ``spacings`` bf16 spacings at
    the output's scale; None for gradients: the torch path's own error plus one spacing, whatever it is). ``out``
    must have ``out_dtype`` (default: ``dtype``'s; fp32 for an fp32 input's gradient under autocast)."""
    scale = ref_fp32.abs().max().item()
    err = (out.float() - ref_fp32).abs().max().item()
    if not (torch.isfinite(out).all() and out.dtype == (out_dtype or to_dtype(dtype))):
        return dict(err=float('nan'), bound=0., scale=scale, ok=False)
    if dtype == 'fp32':  # torch.testing's rule: |out - ref| <= atol + rtol * |ref| everywhere
        ok = bool(((out - ref_fp32).abs() <= 1e-5 * scale + 1e-5 * ref_fp32.abs()).all())
        return dict(err=err, bound=2e-5 * scale, scale=scale, ok=ok)
    torch_err = (torch_out.float() - ref_fp32).abs().max().item()
    bound = torch_err + BF16_EPS * scale
    if spacings is not None:
        bound = min(bound, spacings * BF16_EPS * scale)
    return dict(err=err, bound=bound, scale=scale, ok=err <= bound)


def _inputs(case: Case, device: torch.device):
    g = torch.Generator().manual_seed(1)
    if case.mixer == 'model':
        return torch.randn(case.batch, 3, 16 * case.grid[0], 16 * case.grid[1], generator=g).to(device)
    n = case.prefix + case.grid[0] * case.grid[1]
    return torch.randn(case.batch, n, case.heads * case.head_dim, generator=g).to(device)


def _caller(case: Case, reference: nn.Module, device: torch.device):
    """``call(module, input)``: the case's output of ``module``."""
    if case.mixer == 'model':
        return lambda m, t: m.forward_intermediates(t, [1, 3, 5], output_fmt='NLC')[-1]
    rope = case_rope(case.grid, reference.head_dim, case.rope)
    rope = None if rope is None else rope.to(device)
    return lambda m, t: m(t, case.grid, rope)


def _input_grad(call, module: nn.Module, x: torch.Tensor, out_grad: torch.Tensor) -> torch.Tensor:
    """The gradient of ``x`` for the output gradient ``out_grad``, autograd enabled (training)."""
    leaf = x.detach().clone().requires_grad_()
    with torch.enable_grad():
        out = call(module, leaf)
        return torch.autograd.grad(out, leaf, out_grad.to(out.dtype))[0]


def _output_result(case: Case, reference: nn.Module, fast: nn.Module, x: torch.Tensor, call) -> Dict[str, object]:
    """The tolerance rule on the output: fast path, torch path and fp32 torch path."""
    with torch.inference_mode():
        ref_fp32 = call(reference, x).float()
        if case.dtype != 'fp32':
            dtype = to_dtype(case.dtype)
            reference, fast, x = reference.to(dtype), fast.to(dtype), x.to(dtype)
        torch_out = call(reference, x) if case.dtype != 'fp32' else ref_fp32
        out = call(fast, x)
    return compare(out, torch_out, ref_fp32, case.dtype)


def _grad_result(case: Case, reference: nn.Module, fast: nn.Module, x: torch.Tensor, call) -> Dict[str, object]:
    """The tolerance rule on the input's gradient: fast path, torch path and fp32 torch path."""
    with torch.no_grad():
        shape = call(reference, x).shape
    out_grad = torch.randn(shape, generator=torch.Generator().manual_seed(2)).to(x.device).bfloat16().float()
    ref_fp32 = _input_grad(call, reference, x, out_grad).float()
    if case.autocast:  # fp32 weights and input, the bf16 compute autocast's
        call = functools.partial(_autocast_call, to_dtype(case.dtype), call)
    elif case.dtype != 'fp32':
        dtype = to_dtype(case.dtype)
        reference, fast, x = reference.to(dtype), fast.to(dtype), x.to(dtype)
    torch_grad = _input_grad(call, reference, x, out_grad) if case.dtype != 'fp32' else ref_fp32
    return compare(_input_grad(call, fast, x, out_grad), torch_grad, ref_fp32, case.dtype, spacings=None,
                   out_dtype=x.dtype)


def _autocast_call(dtype: torch.dtype, call, module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.autocast(x.device.type, dtype=dtype):
        return call(module, x)


@contextlib.contextmanager
def tf32_off(dtype: str) -> Iterator[None]:
    """TF32 off for an fp32 case (cuBLAS matmuls and cuDNN convolutions), restored after: with it on, the whole 2F
    model's fp32 input gradient was 2.1e-5 from the torch path's on the H200, against a bound of 6.1e-6."""
    if dtype != 'fp32':
        yield
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def fresh_state() -> None:
    """A case starts as in a fresh process: no self-check verdicts, no kept block masks or RoPE tables, and dynamo
    reset (its recompile limit, 8 per function, counted across cases made later cases run eagerly, unnoticed)."""
    reset_caches()
    torch._dynamo.reset()


class _LogLines(logging.Handler):
    """Keeps the first line of every record at WARNING or above."""

    def __init__(self, lines: List[str]) -> None:
        super().__init__(logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f'{record.name}: {record.getMessage().strip().splitlines()[0]}')


@contextlib.contextmanager
def watched() -> Iterator[List[str]]:
    """A list that, once the block ends, holds one line per warning raised in it (but :data:`HARMLESS_WARNINGS` and
    deprecation notices) and per warning dynamo logged (e.g. 'torch._dynamo hit config.recompile_limit')."""
    seen: List[str] = []
    handler, logger = _LogLines(seen), logging.getLogger('torch._dynamo')
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            yield seen
    finally:
        logger.removeHandler(handler)
    for w in caught:
        text = str(w.message).strip()
        if issubclass(w.category, (DeprecationWarning, FutureWarning)):
            continue  # a library's notice about its own API (torch 2.11's compile warns torch.jit.script_method)
        if not any(harmless in text for harmless in HARMLESS_WARNINGS):
            seen.append(f'{w.category.__name__}: {text.splitlines()[0] if text else ""}')


def mixer_paths(module: nn.Module) -> List[Tuple[str, str, bool]]:
    """``(mixer letter, path it ran, grad)`` for every path an L or W mixer of ``module`` resolved, the verdicts read
    (:func:`~jetvit_mm.models.mixers.kernels.selfcheck.paths_run`)."""
    return [('L' if isinstance(m, LinearAttention) else 'W', path, grad) for m in module.modules()
            if isinstance(m, (LinearAttention, WindowAttention)) for path, grad in selfcheck.paths_run(m)]


def paths_ran(module: nn.Module) -> List[str]:
    """The paths the L and W mixers of ``module`` ran, as ``'L:triton'``, ``'W:flex'``, ... (the verdicts read;
    what each benchmark result and kernel case records)."""
    return sorted({f'{letter}:{path}' for letter, path, _ in mixer_paths(module)})


def path_problems(case: Case, fast: nn.Module, device_type: str) -> List[str]:
    """Why ``case`` did not test its fast path: a mixer ran another path than ``case.kernel`` (for ``'auto'``:
    :data:`AUTO_PATHS` on this device type), or a self-check failed; empty when it did."""
    problems = set()
    ran = mixer_paths(fast)
    if case.mixer != 'model' and not ran:
        problems.add('the mixer never resolved a path')
    for letter, path, grad in ran:
        want = case.kernel if case.kernel != 'auto' else AUTO_PATHS.get(device_type, {}).get(letter)
        if want is not None and path != want:
            problems.add(f'{letter} ran the {path!r} path{" (with grad)" if grad else ""}, not {want!r}')
    problems.update(f'self-check of {k[0]!r} failed on {k[1]} ({k[2]})' for k, ok in selfcheck.VERDICTS.items()
                    if not ok)
    return sorted(problems)


def _compare_case(case: Case, device: torch.device) -> Tuple[Dict[str, object], List[str], List[str]]:
    """The case's comparison, the problems with the path it ran, and the paths it ran."""
    try:
        reference, fast = build_model_pair(case) if case.mixer == 'model' else build_mixer_pair(case)
        reference, fast = reference.to(device), fast.to(device)
        x = _inputs(case, device).bfloat16().float()  # the same values in both dtypes
        call = _caller(case, reference, device)
        result = (_grad_result if case.grad else _output_result)(case, reference, fast, x, call)
        return result, path_problems(case, fast, device.type), paths_ran(fast)
    except Exception as exc:  # a path that raises is a failed case, named with its error
        return dict(err=float('nan'), bound=0., scale=0., ok=False,
                    error=''.join(traceback.format_exception_only(type(exc), exc)).strip()), [], []


def run_case(case: Case, device: torch.device) -> Dict[str, object]:
    """One case's result: its name, error, bound, pass, the paths its mixers ran (``'L:triton'``, ...), seconds, and
    the error text if the fast path raised, or why the case did not test its fast path (then it fails)."""
    start = time.perf_counter()
    fresh_state()
    with tf32_off(case.dtype), watched() as seen:
        result, problems, paths = _compare_case(case, device)
    problems += seen
    if problems:
        result = dict(result, ok=False, error='; '.join(filter(None, [result.get('error')] + problems)))
    return dict(name=case.name, **asdict(case), **result, paths=paths, seconds=round(time.perf_counter() - start, 3))


def run_checks(device: torch.device, dtypes=('fp32', 'bf16'), quick: bool = False,
               kernels: Optional[Sequence[str]] = None, fp32: str = 'all',
               report: Optional[Callable[[Dict[str, object]], None]] = None,
               production: bool = False) -> List[Dict[str, object]]:
    """Every case of :func:`cases` (``production``: of :func:`production_cases`) on ``device``; each result says
    ``ok``, and goes to ``report`` as it ends."""
    torch.manual_seed(0)
    results = []
    chosen = production_cases(device.type, quick) if production else cases(device.type, dtypes, quick, kernels, fp32)
    for case in chosen:
        results.append(run_case(case, device))
        if report is not None:
            report(results[-1])
    return results


def result_line(r: Dict[str, object]) -> str:
    """One case's line: pass or FAIL, name, error against bound, paths, seconds, and why it failed."""
    paths = f' [{" ".join(r["paths"])}]' if r.get('paths') else ''
    return (f'{"ok  " if r["ok"] else "FAIL"} {r["name"]}: err {r["err"]:.3g} bound {r["bound"]:.3g}{paths} '
            f'({r["seconds"]} s) {r.get("error", "")}').rstrip()


def summary(results: List[Dict[str, object]]) -> str:
    failed = [r for r in results if not r['ok']]
    lines = [f'{len(results) - len(failed)} of {len(results)} kernel checks passed']
    lines += [f'FAILED {r["name"]}: err {r["err"]:.3g} > bound {r["bound"]:.3g} {r.get("error", "")}'.rstrip()
              for r in failed]
    return '\n'.join(lines)

