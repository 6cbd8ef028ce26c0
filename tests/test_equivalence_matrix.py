"""Every built-in mixer on every kernel it offers equals an independent float64 reference (issue 29).

The reference (``reference_mixer`` below) is written here from the formulas, not from the repo's torch path: softmax
attention; window attention with prefix tokens (a patch query sees the prefix tokens and its own window's patches, a
prefix query sees every token; a grid side shorter than the window is one window); ReLU linear attention
``o_i = sum_j (R phi(q_i) . R phi(k_j)) v_j / (phi(q_i) . sum_j phi(k_j) + eps)`` plus the depthwise conv on V (static,
squeeze: a kernel per image from the mean of V, token: a kernel per token from its V); RoPE in both layouts on the
patch tokens only. The mixer's weights are copied into it (every parameter, by name), and the RoPE tables are random
rotations (not timm's), laid out as each convention pairs the features.

Axes: mixer (F, W, L with every conv variant) x kernel x RoPE layout (rotate-half, interleaved, none) x prefix tokens
(0, 1, 5) x grid (odd 3 x 5: W's 2 x 2 windows padded; even 4 x 4: not) x batch (1, 3) x dtype (fp32, bf16).

- The torch path, the only one that trains, runs the full product, with the input's and every weight's gradient
  against float64 autograd of the reference.
- The fast paths, checked on outputs over a pruned product (``fast_cases``, which says why each pruning cannot hide a
  difference). With autograd recording, ``'compile'`` and ``'fused'`` give way to the torch path
  (tests/test_fast_mixers.py); ``'triton'`` trains through its Triton backward, and W's ``'flex'`` through
  FlexAttention's on CUDA (none on the CPU: the torch path trains here; tests/test_kernel_choice.py).
  Kernels: ``'fused'`` (the formulation a caller's own torch.compile traces inline, run here by dynamo with the eager
  backend), ``'compile'`` (inductor), ``'flex'`` (W, FlexAttention compiled for the CPU) and ``'triton'`` (L, the
  Triton kernels under ``TRITON_INTERPRET=1``, in a process of their own: ``triton_results``).
- A mixer set to a fast kernel trains on the torch path (also inside the caller's torch.compile): its gradients
  against the reference's, once per mixer and kernel; on ``'triton'`` (under the interpreter) through the Triton
  backward, for every value of every axis (``TRITON_TRAINING_CASES``).
"""
import itertools
import json
import math
import os
import subprocess
import sys
import traceback
import warnings
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch import nn

from jetvit_mm.models.mixers import CONV_VARIANTS, DEFAULT_MIXERS, MIXER_REGISTRY
from jetvit_mm.models.mixers.kernels import LINEAR_KERNELS, WINDOW_KERNELS, select_linear_kernel, select_window_kernel
from jetvit_mm.models.mixers.kernels.availability import compile_available, flex_available

from .conftest import HANG_GUARD_S, REPO

# max |out - reference| / max |reference| per dtype: fp32 rounding; bf16 a few bf16 spacings at the output's scale
# (the torch path's worst here is about 1.5 spacings). A wrong rotation sign is off by more than half the scale.
BF16_EPS = torch.finfo(torch.bfloat16).eps  # 2 ** -7
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 4 * BF16_EPS}
GRAD_TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 6 * BF16_EPS}  # per gradient tensor, at its own scale

DIM, HEADS = 32, 2  # head_dim 16
WINDOW = 2
KERNEL_SIZE = 3
LAYOUTS = ('rotate_half', 'interleaved', 'none')
PREFIXES = (0, 1, 5)
GRIDS = {'odd': (3, 5), 'even': (4, 4)}
BATCHES = (1, 3)
DTYPES = {'fp32': torch.float32, 'bf16': torch.bfloat16}
# mixer id -> (letter of the default table, options)
MIXERS = {'F': ('F', {}), 'W': ('W', dict(window_size=WINDOW))}
MIXERS.update({f'L-{conv}': ('L', dict(conv=conv, kernel_size=KERNEL_SIZE)) for conv in CONV_VARIANTS})
FAST_KERNELS = {'F': (), 'W': ('fused', 'compile', 'flex'), 'L': ('fused', 'compile', 'triton')}


# ----------------------------------------------------------------------------- the float64 reference

class Weights:
    """The mixer's parameters in float64 (autograd leaves), each read by name; :meth:`unused` names any the
    reference did not read."""

    def __init__(self, mixer: nn.Module) -> None:
        self.leaves = {name: p.detach().double().requires_grad_() for name, p in mixer.named_parameters()}
        self.read = set()

    def __getitem__(self, name: str) -> torch.Tensor:
        self.read.add(name)
        return self.leaves[name]

    def unused(self) -> List[str]:
        return sorted(set(self.leaves) - self.read)


def rotate(x: torch.Tensor, rope: torch.Tensor, layout: str) -> torch.Tensor:
    """RoPE ``x * cos + rot(x) * sin``: rotate-half ``rot(x) = [-x2, x1]``, interleaved ``rot(x)[2m] = -x[2m+1]``,
    ``rot(x)[2m+1] = x[2m]``."""
    sin, cos = rope.double().chunk(2, dim=-1)
    C = x.shape[-1]
    index = torch.arange(C)
    if layout == 'rotate_half':
        partner, sign = (index + C // 2) % C, torch.where(index < C // 2, -1., 1.)
    else:
        partner, sign = index ^ 1, torch.where(index % 2 == 0, -1., 1.)
    return x * cos + sign.double() * x[..., partner] * sin


def rotate_patches(x: torch.Tensor, rope: Optional[torch.Tensor], prefix: int, layout: str) -> torch.Tensor:
    if rope is None:
        return x
    return torch.cat([x[..., :prefix, :], rotate(x[..., prefix:, :], rope, layout)], dim=-2)


def softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float('-inf'))
    return scores.softmax(dim=-1) @ v


def window_mask(grid: Tuple[int, int], window_size: int, prefix: int) -> torch.Tensor:
    """``[N, N]`` True where query i sees key j."""
    h, w = grid
    wh, ww = min(window_size, h), min(window_size, w)
    token = torch.arange(h * w)
    window = (token // w) // wh * w + (token % w) // ww  # a window's id, unique per window
    mask = torch.ones(prefix + h * w, prefix + h * w, dtype=torch.bool)
    mask[prefix:, prefix:] = window[:, None] == window[None, :]
    return mask


def linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rope: Optional[torch.Tensor], prefix: int,
                     layout: str, eps: float) -> torch.Tensor:
    """ReLU linear attention, RoPE in the numerator only, written as its (unnormalised) attention matrix."""
    q, k = F.relu(q), F.relu(k)
    denominator = q @ k.sum(dim=-2, keepdim=True).transpose(-2, -1)
    scores = rotate_patches(q, rope, prefix, layout) @ rotate_patches(k, rope, prefix, layout).transpose(-2, -1)
    return (scores @ v) / (denominator + eps)


def depthwise(v: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """Zero-padded depthwise cross-correlation of ``v`` ``[B, D, h, w]`` with ``kernels`` ``[B, D, k, k, h, w]``
    (a kernel per image, channel and position; size-1 dims broadcast)."""
    h, w = v.shape[-2:]
    k = kernels.shape[2]
    padded = F.pad(v, (k // 2,) * 4)
    return sum(kernels[:, :, i, j] * padded[:, :, i:i + h, j:j + w] for i in range(k) for j in range(k))


def conv_term(weights: Weights, conv: str, v: torch.Tensor, grid: Tuple[int, int]) -> torch.Tensor:
    """The conv on V of the patch tokens ``v`` (``[B, h * w, D]``), ``[B, h * w, D]``."""
    B, _, D = v.shape
    h, w = grid
    k = KERNEL_SIZE
    image = v.transpose(1, 2).reshape(B, D, h, w)

    def generated(g: torch.Tensor) -> torch.Tensor:  # Linear -> SiLU -> Linear
        hidden = g @ weights['conv.fc1.weight'].T
        return (hidden * torch.sigmoid(hidden)) @ weights['conv.fc2.weight'].T + weights['conv.fc2.bias']

    if conv == 'static':
        kernels = weights['conv.weight'].reshape(1, D, k, k, 1, 1)
    elif conv == 'squeeze':
        kernels = generated(v.mean(dim=1)).reshape(B, D, k, k, 1, 1)
    else:  # token
        kernels = generated(v).reshape(B, h, w, D, k, k).permute(0, 3, 4, 5, 1, 2)
    return depthwise(image, kernels).reshape(B, D, h * w).transpose(1, 2)


def reference_mixer(mixer_id: str, weights: Weights, x: torch.Tensor, grid: Tuple[int, int],
                    rope: Optional[torch.Tensor], prefix: int, layout: str, eps: float) -> torch.Tensor:
    """What mixer ``mixer_id`` computes, in float64, from ``weights`` and ``x`` (``[B, N, D]``)."""
    B, N, D = x.shape
    qkv = x @ weights['qkv.weight'].T + weights['qkv.bias']
    q, k, v = qkv.reshape(B, N, 3, HEADS, D // HEADS).permute(2, 0, 3, 1, 4)  # [B, heads, N, head_dim]
    if mixer_id.startswith('L'):
        out = linear_attention(q, k, v, rope, prefix, layout, eps)
    else:
        q, k = rotate_patches(q, rope, prefix, layout), rotate_patches(k, rope, prefix, layout)
        out = softmax_attention(q, k, v, window_mask(grid, WINDOW, prefix) if mixer_id == 'W' else None)
    out = out.transpose(1, 2).reshape(B, N, D)
    conv = MIXERS[mixer_id][1].get('conv', 'none')
    if conv != 'none':
        out = torch.cat([out[:, :prefix], out[:, prefix:] + conv_term(weights, conv, qkv[:, prefix:, 2 * D:], grid)],
                        dim=1)
    return out @ weights['proj.weight'].T + weights['proj.bias']


# ----------------------------------------------------------------------------- inputs and mixers

def random_rope(grid: Tuple[int, int], layout: str, seed: int = 1) -> Optional[torch.Tensor]:
    """``(h * w, 2 * head_dim)`` ``[sin, cos]``: a random angle per patch and feature pair, laid out as ``layout``
    pairs the features (the halves, or neighbours); None without RoPE."""
    if layout == 'none':
        return None
    g = torch.Generator().manual_seed(seed)
    angle = torch.rand(grid[0] * grid[1], DIM // HEADS // 2, generator=g) * 2 * math.pi
    angle = torch.cat([angle, angle], dim=-1) if layout == 'rotate_half' else angle.repeat_interleave(2, dim=-1)
    return torch.cat([angle.sin(), angle.cos()], dim=-1)


def build(mixer_id: str, kernel: str, prefix: int, layout: str, dtype: torch.dtype) -> nn.Module:
    """The mixer with random non-trivial weights (the zero-initialised conv generators too), in ``dtype``, eval."""
    letter, options = MIXERS[mixer_id]
    cls = MIXER_REGISTRY.get(DEFAULT_MIXERS[letter]['type'])
    if kernel != 'torch':
        options = dict(options, kernel='auto' if kernel == 'fused' else kernel)
    mixer = cls(dim=DIM, num_heads=HEADS, num_prefix_tokens=prefix, rotate_half=layout != 'interleaved', **options)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in mixer.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return mixer.to(dtype).eval()


def tokens(batch: int, prefix: int, grid: Tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(2)
    return torch.randn(batch, prefix + grid[0] * grid[1], DIM, generator=g).to(dtype)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).abs().max() / ref.abs().max()).item()


def assert_matches(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str = 'output') -> None:
    assert out.dtype == dtype and out.shape == ref.shape, (what, out.dtype, tuple(out.shape), tuple(ref.shape))
    error = relative_error(out, ref)
    assert error <= TOLERANCE[dtype] if what == 'output' else error <= GRAD_TOLERANCE[dtype], (what, error)


def case_id(mixer_id, kernel, layout, prefix, grid_name, batch, dtype_name) -> str:
    return f'{mixer_id}-{kernel}-{layout}-p{prefix}-{grid_name}-b{batch}-{dtype_name}'


def check_case(mixer_id: str, kernel: str, layout: str, prefix: int, grid_name: str, batch: int, dtype_name: str,
               grad: bool = False) -> None:
    """The mixer on ``kernel`` against the reference: its output, and with ``grad`` (autograd recording, as in
    training) the input's and every weight's gradient."""
    dtype, grid = DTYPES[dtype_name], GRIDS[grid_name]
    mixer = build(mixer_id, kernel, prefix, layout, dtype)
    x, rope = tokens(batch, prefix, grid, dtype).requires_grad_(grad), random_rope(grid, layout)
    call = mixer
    if kernel == 'fused':  # the caller's own torch.compile traces the mixer inline
        call = torch.compile(mixer, backend='eager', fullgraph=True, dynamic=False)
    with torch.set_grad_enabled(grad):
        out = call(x, grid, rope)
    weights = Weights(mixer)
    x64 = x.detach().double().requires_grad_(grad)
    ref = reference_mixer(mixer_id, weights, x64, grid, rope, prefix, layout, getattr(mixer, 'eps', 0.))
    assert not weights.unused(), weights.unused()
    assert_matches(out, ref.detach(), dtype)
    if not grad:
        return
    out_grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    (out.double() * out_grad).sum().backward()
    (ref * out_grad).sum().backward()
    assert_matches(x.grad, x64.grad, dtype, 'input gradient')
    for name, p in mixer.named_parameters():
        assert_matches(p.grad, weights.leaves[name].grad, dtype, f'gradient of {name}')


# ----------------------------------------------------------------------------- the torch path: outputs and gradients

TORCH_CASES = list(itertools.product(MIXERS, LAYOUTS, PREFIXES, GRIDS, BATCHES, DTYPES))


@pytest.mark.parametrize('mixer_id,layout,prefix,grid_name,batch,dtype_name', TORCH_CASES,
                         ids=[case_id(m, 'torch', *rest) for m, *rest in TORCH_CASES])
def test_torch_path_and_its_gradients_equal_the_reference(mixer_id, layout, prefix, grid_name, batch, dtype_name):
    check_case(mixer_id, 'torch', layout, prefix, grid_name, batch, dtype_name, grad=True)


# ----------------------------------------------------------------------------- the fast paths: outputs

AXES = (LAYOUTS, PREFIXES, tuple(GRIDS), BATCHES, tuple(DTYPES))


def all_pairs(axes: Tuple[Tuple, ...]) -> List[Tuple]:
    """Rows of the product of ``axes`` in which every pair of values of two axes appears at least once (greedy: each
    row the first that covers the most pairs not yet covered)."""
    pairs = list(itertools.combinations(range(len(axes)), 2))
    missing = {(i, a, j, b) for i, j in pairs for a in axes[i] for b in axes[j]}
    rows = []
    while missing:
        row = max(itertools.product(*axes), key=lambda r: sum((i, r[i], j, r[j]) in missing for i, j in pairs))
        rows.append(row)
        missing -= {(i, row[i], j, row[j]) for i, j in pairs}
    return rows


# every value of every axis at least once, the interleaved layout with prefix tokens in bf16
EACH_VALUE = [('interleaved', 5, 'odd', 3, 'bf16'), ('rotate_half', 1, 'even', 1, 'fp32'),
              ('none', 0, 'odd', 3, 'fp32')]
ONE_ROW = [('interleaved', 5, 'odd', 3, 'bf16')]  # every offset non-trivial: prefix, batch, window and grid padding


def fast_cases() -> Iterator[Tuple]:
    """(mixer, kernel, layout, prefix, grid, batch, dtype) for the fast paths. Why the product can be pruned:

    - A fast path branches on each axis in its own place: the RoPE layout in the rotation table and the partner
      each feature rotates with, the prefix in slices and the table's identity rows, the grid in the window padding
      and masks (W) and the conv's image (L), the batch in reshapes, the dtype in the matmul operands (the rotation
      is fp32 whatever the input). A wrong result needs a wrong branch on one axis or a wrong pairing of two (the
      interleaved table with prefix rows, a padded window's prefix keys, a batch of windows in bf16): every pair of
      values of two axes runs (``all_pairs``) on W's ``'fused'`` and on L's ``'fused'`` and ``'triton'`` (squeeze conv).
    - ``'compile'`` compiles with inductor the formulation ``'fused'`` traces and runs eagerly (all pairs above), and
      ``'flex'`` compiles the torch path's rotation (``rotate_query_key``, all of the torch path's product) with
      FlexAttention over a window-major layout: inductor's code changes with the shapes, the dtype and the options,
      every value of which ``EACH_VALUE`` holds (an inductor compile per row is what this file's time goes to).
    - The other conv variants differ from the squeeze conv on a fast path only in the conv term, which those paths
      take from the module itself (``value_conv``: the torch path's code, checked on the full product above) or do
      not have ('none'), added to the patch rows after the attention: ``ONE_ROW`` per kernel shows it added there.
    """
    pairs = all_pairs(AXES)
    for mixer_id, (letter, options) in MIXERS.items():
        for kernel in FAST_KERNELS[letter]:
            if options.get('conv', 'squeeze') != 'squeeze':
                rows = ONE_ROW
            else:
                rows = pairs if kernel in ('fused', 'triton') else EACH_VALUE
            yield from ((mixer_id, kernel, *row) for row in rows)


FAST_CASES = list(fast_cases())
# 'fused' runs with dynamo's eager backend: no compiler needed
NEEDS = {'fused': lambda device: True, 'compile': compile_available, 'flex': flex_available}


@pytest.fixture
def fresh_dynamo():
    """Each compiled case starts from empty dynamo caches, so none runs past the recompile limit (uncompiled)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


COMPILED_CASES = [c for c in FAST_CASES if c[1] != 'triton']


@pytest.mark.parametrize('mixer_id,kernel,layout,prefix,grid_name,batch,dtype_name', COMPILED_CASES,
                         ids=[case_id(*c) for c in COMPILED_CASES])
def test_compiled_paths_equal_the_reference(fresh_dynamo, mixer_id, kernel, layout, prefix, grid_name, batch,
                                            dtype_name):
    if not NEEDS[kernel]('cpu'):
        pytest.skip(f'kernel {kernel!r} needs torch.compile on the CPU (a C++ compiler)')
    select = select_window_kernel if mixer_id == 'W' else select_linear_kernel
    if kernel != 'fused':  # the path asked for is the one that runs (none falls back to another)
        assert select(kernel, torch.device('cpu'), 0, needs_grad=False) == kernel
    check_case(mixer_id, kernel, layout, prefix, grid_name, batch, dtype_name)


TRAINING_CASES = [(mixer_id, kernel) for mixer_id, (letter, _) in MIXERS.items() for kernel in FAST_KERNELS[letter]]


@pytest.mark.parametrize('mixer_id,kernel', TRAINING_CASES, ids=[f'{m}-{k}' for m, k in TRAINING_CASES])
def test_a_mixer_set_to_a_fast_kernel_trains_with_the_reference_gradients(fresh_dynamo, mixer_id, kernel):
    check_case(mixer_id, kernel, *ONE_ROW[0], grad=True)


TRITON_CASES = [c for c in FAST_CASES if c[1] == 'triton']


def triton_case(*case) -> None:
    """One Triton case (run under ``TRITON_INTERPRET=1``): the path asked for runs, and equals the reference."""
    assert select_linear_kernel('triton', torch.device('cpu'), 0, needs_grad=False) == 'triton'
    check_case(*case)


@pytest.fixture(scope='module')
def triton_results() -> Dict[str, Optional[str]]:
    """The Triton cases, run in one fresh interpreter with ``TRITON_INTERPRET=1`` (``python -m
    tests.test_equivalence_matrix``): triton takes its interpreter only if the variable is set when it is imported
    (its own library functions, ``tl.zeros`` and the like, are built then), and timm imports it with this file; a
    process of its own also keeps the variable from every other test. ``{case id: None or the failure}``."""
    pytest.importorskip('triton')
    proc = subprocess.run([sys.executable, '-m', 'tests.test_equivalence_matrix'], cwd=REPO, capture_output=True,
                          text=True, env=dict(os.environ, TRITON_INTERPRET='1'), timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize('case', [case_id(*c) for c in TRITON_CASES])
@pytest.mark.integration
def test_triton_kernels_equal_the_reference(triton_results, case):
    assert triton_results[case] is None, triton_results[case]


# the Triton backward: every value of every axis on the squeeze conv, ONE_ROW for the other conv terms (their
# gradient flows through the module's own conv, the torch path's code, from the output's gradient on the patch rows)
TRITON_TRAINING_CASES = [('L-squeeze', 'triton', *row) for row in EACH_VALUE] + [
    (mixer_id, 'triton', *ONE_ROW[0]) for mixer_id, (letter, options) in MIXERS.items()
    if letter == 'L' and options['conv'] != 'squeeze']


def triton_training_case(*case) -> None:
    """One case with gradients (under ``TRITON_INTERPRET=1``): the Triton autograd Function runs (a spy counts its
    calls), and the output and every gradient equal the reference's."""
    from jetvit_mm.models.mixers import linear as linear_module

    assert select_linear_kernel('triton', torch.device('cpu'), 0, needs_grad=True) == 'triton'
    calls, trainable = [], linear_module.trainable_triton_linear_attention
    linear_module.trainable_triton_linear_attention = lambda *args: calls.append(1) or trainable(*args)
    try:
        check_case(*case, grad=True)
    finally:
        linear_module.trainable_triton_linear_attention = trainable
    assert calls, 'the Triton autograd Function did not run'


@pytest.mark.parametrize('case', [case_id(*c) + '-grad' for c in TRITON_TRAINING_CASES])
@pytest.mark.integration  # the Triton interpreter in its own process
def test_triton_kernels_train_with_the_reference_gradients(triton_results, case):
    assert triton_results[case] is None, triton_results[case]


def test_the_matrix_covers_every_builtin_mixer_conv_and_kernel():
    assert {letter for letter, _ in MIXERS.values()} == set(DEFAULT_MIXERS)
    assert {options['conv'] for _, options in MIXERS.values() if 'conv' in options} == set(CONV_VARIANTS)
    ran = {(MIXERS[c[0]][0], c[1]) for c in FAST_CASES} | {(letter, 'torch') for letter in DEFAULT_MIXERS}
    offered = {('W', k) for k in WINDOW_KERNELS} | {('L', k) for k in LINEAR_KERNELS} | {('F', 'torch')}
    assert offered - {(letter, 'auto') for letter in 'WL'} <= ran
    for mixer_id in ('W', 'L-squeeze'):  # every value of every axis, for every fast kernel
        for kernel in FAST_KERNELS[MIXERS[mixer_id][0]]:
            rows = [c[2:] for c in FAST_CASES if c[:2] == (mixer_id, kernel)]
            assert [set(column) for column in zip(*rows)] == [set(axis) for axis in AXES], (mixer_id, kernel)


if __name__ == '__main__':  # the Triton cases, run by ``triton_results`` under TRITON_INTERPRET=1
    warnings.filterwarnings('error', message='jetvit_mm: the fast kernel')  # a fallback is a failure, not a pass
    results = {}
    for run_one, specs, suffix in ((triton_case, TRITON_CASES, ''),
                                   (triton_training_case, TRITON_TRAINING_CASES, '-grad')):
        for triton_spec in specs:
            try:
                run_one(*triton_spec)
                results[case_id(*triton_spec) + suffix] = None
            except Exception:  # reported, with its traceback, by that case's test
                results[case_id(*triton_spec) + suffix] = traceback.format_exc()
    print(json.dumps(results))
