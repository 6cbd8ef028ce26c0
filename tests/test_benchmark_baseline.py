"""A fair baseline in the whole-model benchmark (issue #30 items 4 and 8): the SDPA backend of every F layer is in
the result, the teacher with cuDNN attention is timed where that runs (CUDA) and every speed-up is stated against
the fastest teacher; ``--compile`` combines with ``--cuda-graph`` on CUDA and is refused, naming the device, off it."""
import importlib.util

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend

from jetvit_mm.benchmark import models as model_bench
from jetvit_mm.benchmark.models import add_speedups, benchmark_models, jetvit_kwargs, model_entries
from jetvit_mm.benchmark.sdpa import CUDNN_TEACHER, PinnedSDPA, cudnn_teacher_entries, make_runners, sdpa_choice
from jetvit_mm.models.mixers import default_mixers

from .conftest import REPO

TINY = dict(model_name='dinov3_vits16', depth=3, embed_dim=32, num_heads=2,
            mixers=default_mixers(W=dict(window_size=2)))
QUICK = dict(warmup=0, repeat=1, batch=1, dtype='fp32', device='cpu', compile_model=False, cuda_graph=False,
             throughput=None, threads=1, malloc='system', malloc_kept=False, memory=False, profile=False)
BACKENDS = set(SDPBackend.__members__)


def load_benchmark_tool():
    spec = importlib.util.spec_from_file_location('_tool_benchmark', REPO / 'tools' / 'benchmark.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_result_records_the_sdpa_backend_of_every_f_layer():
    entries = model_entries(jetvit_kwargs(TINY, 'unused'), ['LWF', 'all-L'])
    result = benchmark_models(entries, sizes=[(32, 64)], **QUICK)
    backends = result['sdpa_backends']
    assert set(backends) == {'teacher', 'LWF'}  # all-L has no F layer
    assert [layer['layer'] for layer in backends['teacher']['32x64']] == [0, 1, 2]
    assert [layer['layer'] for layer in backends['LWF']['32x64']] == [2]
    # what the F layer's SDPA call takes: its q, k, v as views of one qkv output, [B, heads, 5 + 2 * 4, 16]
    qkv = torch.empty(1, 5 + 8, 3, 2, 16)
    expected = sdpa_choice(*qkv.permute(2, 0, 3, 1, 4).unbind(0))
    assert {layer['backend'] for layers in backends.values() for layer in layers['32x64']} == {expected}
    assert expected in BACKENDS
    assert all(row['reference'] == 'teacher' for row in result['rows'])


def test_speedups_are_stated_against_the_fastest_teacher():
    rows = [{'size': '32x64', 'label': 'teacher', 'arch': 'FFF', 'median_ms': 10., 'min_ms': 9.},
            {'size': '32x64', 'label': CUDNN_TEACHER, 'arch': 'FFF', 'median_ms': 8., 'min_ms': 7.},
            {'size': '32x64', 'label': 'all-L', 'arch': 'LLL', 'median_ms': 4., 'min_ms': 3.5}]
    add_speedups(rows, 'FFF')
    hybrid = rows[2]
    assert hybrid['reference'] == CUDNN_TEACHER
    assert hybrid['speedup'] == pytest.approx(8. / 4.) and hybrid['speedup_min'] == pytest.approx(7. / 3.5)
    assert rows[0]['speedup'] == pytest.approx(8. / 10.)


class _Probe(nn.Module):
    """Records the backend its SDPA call would take."""

    def forward(self, q: torch.Tensor) -> str:
        return sdpa_choice(q, q, q)


def test_a_pinned_teacher_runs_its_sdpa_on_that_backend_and_cudnn_only_where_it_runs():
    q = torch.randn(1, 2, 16, 8)
    assert _Probe()(q) != 'MATH'  # the CPU's own choice for this shape
    assert PinnedSDPA(_Probe(), 'MATH')(q) == 'MATH'
    entries = [{'label': 'teacher', 'arch': 'FFF', 'kwargs': {}, 'head': None}]
    assert cudnn_teacher_entries(entries, torch.device('cpu')) == []  # timed on CUDA only
    runners = make_runners({'teacher': _Probe(), 'pinned': _Probe()},
                           entries + [dict(entries[0], label='pinned', sdpa_backend='MATH')], False, False)
    assert runners['teacher'](q) != 'MATH' and runners['pinned'](q) == 'MATH'


def test_compile_with_cuda_graphs_is_refused_off_cuda_naming_the_device():
    tool = load_benchmark_tool()
    args = tool.parse_args(['models', '--compile', '--cuda-graph', '--size', '32', '64'])
    with pytest.raises(SystemExit, match=r'--cuda-graph needs --device cuda, got --device cpu \(with --compile too'):
        tool.check_cuda_graph(args, torch.device('cpu'))
    args.device = 'cuda'
    tool.check_cuda_graph(args, torch.device('cuda'))  # the combination itself is accepted on CUDA
    assert model_bench.make_runners is make_runners
