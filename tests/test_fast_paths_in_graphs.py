"""The fast paths inside a caller's torch.compile (issue #30 items 3 and 4).

- W on FlexAttention: the block mask (and the window-major token orders) is built once per grid, window, prefix and
  device and kept: a second forward reuses it, and a compiled forward takes a kept one as an input of its graph. A
  compiled forward that finds none builds it inside its graph (once, while tracing: no graph break), and keeps
  nothing (builds of the mask counted).
- L on Triton: the kernels are the custom op ``jetvit::linear_attention_triton`` (``torch.library.triton_op``); its
  fake implementation gives the output's shape and dtype without running a kernel, and ``torch.compile(fullgraph=True)``
  of a mixer (and a model) set to ``'triton'`` traces that op into its graph, not the torch formula (the graph
  inspected), computing the same values. Run under ``TRITON_INTERPRET=1`` in a process of their own
  (``python -m tests.test_fast_paths_in_graphs``), as tests/test_fast_mixers.py does.
"""
from typing import Callable, Dict, List, Optional, Tuple

import pytest
import torch
import torch._dynamo

from jetvit_mm.models.mixers import WindowAttention
from jetvit_mm.models.mixers import window as window_module
from jetvit_mm.models.mixers.kernels.availability import flex_available
from jetvit_mm.process_state import reset_caches

from .interpreted import interpreted, report_cases

GRID = (3, 5)  # 2 x 3 windows of 2 x 2, the last row and column padded


@pytest.fixture
def mask_builds(monkeypatch) -> List[tuple]:
    """Every eager build of W's block mask (its grid), with empty mask caches and dynamo caches. Builds inside a
    compiled graph are not listed (appending there would be guarded on, and compile the graph again): a graph that
    builds one holds argsort calls (:func:`graphs`)."""
    from jetvit_mm.models.mixers.kernels import window_flex

    calls = []
    real = window_flex._build_block_mask

    def counting(grid_size, *args):
        if not torch.compiler.is_compiling():
            calls.append(grid_size)
        return real(grid_size, *args)

    monkeypatch.setattr(window_flex, '_build_block_mask', counting)
    monkeypatch.setattr(window_flex, '_CACHE', {})
    # the eager Flex path without inductor (FlexAttention's eager fallback: same values, no compile time)
    monkeypatch.setattr(window_module, 'compiled', lambda fn, shape=None: fn)
    reset_caches()  # a verdict on the compiled Flex path reached by another test does not hold for the eager one
    torch._dynamo.reset()
    yield calls
    reset_caches()
    torch._dynamo.reset()


def graphs() -> Tuple[Callable, List[torch.fx.GraphModule]]:
    """A torch.compile backend that runs each graph as it is and keeps it, and the graphs it was given."""
    kept = []

    def backend(gm, example_inputs):
        kept.append(gm)
        return gm.forward

    return backend, kept


def sorts(gms: List[torch.fx.GraphModule]) -> int:
    """The argsort calls in ``gms``: the token orders and the block mask built in a graph hold them."""
    return sum(node.target in (torch.argsort, torch.Tensor.argsort) or 'argsort' in str(node.target)
               for gm in gms for node in gm.graph.nodes)


def flex_window(prefix: int = 1) -> WindowAttention:
    if not flex_available('cpu'):
        pytest.skip('FlexAttention on the CPU needs torch.compile (a C++ compiler)')
    torch.manual_seed(0)
    return WindowAttention(32, 2, num_prefix_tokens=prefix, window_size=2, kernel='flex').eval()


def tokens(prefix: int = 1) -> torch.Tensor:
    return torch.randn(2, prefix + GRID[0] * GRID[1], 32, generator=torch.Generator().manual_seed(0))


def test_a_second_forward_and_a_compiled_forward_reuse_the_block_mask(mask_builds):
    mixer, x = flex_window(), tokens()
    with torch.inference_mode():
        first = mixer(x, GRID)
        assert len(mask_builds) == 1
        assert torch.equal(mixer(x, GRID), first)
        backend, gms = graphs()
        compiled = torch.compile(mixer, backend=backend, fullgraph=True)  # the kept mask: no graph break either
        for _ in range(2):
            torch.testing.assert_close(compiled(x, GRID), first, rtol=1e-5, atol=1e-6)
    assert len(mask_builds) == 1, f'the block mask was built again: {mask_builds}'
    assert len(gms) == 1 and sorts(gms) == 0  # one graph, which takes the kept mask and orders as inputs


def test_a_compiled_forward_without_a_kept_mask_builds_it_in_its_graph(mask_builds):
    from jetvit_mm.models.mixers.kernels import window_flex

    mixer, x = flex_window(prefix=5), tokens(prefix=5)
    backend, gms = graphs()
    with torch.inference_mode():
        compiled = torch.compile(mixer, backend=backend, fullgraph=True)  # no graph break for the build
        out = compiled(x, GRID)
        compiled(x, GRID)
        assert len(gms) == 1 and sorts(gms) > 0  # one graph, compiled once, that builds the orders and the mask
        assert not mask_builds and not window_flex._CACHE  # nothing built outside it, nothing kept
        reference = mixer(x, GRID)  # eager: built and kept
        mixer(x, GRID)
    assert mask_builds == [GRID], f'the kept block mask was built again: {mask_builds}'
    torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-6)
    other = (GRID[0] + 2, GRID[1])  # another grid: one more mask
    with torch.inference_mode():
        mixer(torch.randn(1, 5 + other[0] * other[1], 32), other)
    assert mask_builds == [GRID, other]


# ----------------------------------------------------------------------------- torch.compile is not torch.export
def test_a_compiled_model_is_not_taken_for_an_export_where_dynamo_folds_is_exporting(monkeypatch):
    """torch 2.11's dynamo folds ``torch.compiler.is_exporting()`` to True under every torch.compile (torch 2.12 and
    later return torch.export's flag). Emulated here by a replacement that dynamo traces: inside a compiled forward
    the mixers still choose their compiled formulations, not the export ones (W as masked full attention), and a
    compiled W mixer computes its windows without the masked full attention."""
    from jetvit_mm.models.mixers import window as window_mod
    from jetvit_mm.models.mixers.kernels.dispatch import select_linear_kernel, select_window_kernel
    from jetvit_mm.models.tracing import exporting, exporting_symbolic_grid

    monkeypatch.setattr(torch.compiler, 'is_exporting',
                        lambda: torch.compiler.is_compiling() or torch.compiler._is_exporting_flag)
    seen = []

    def probe(x):
        seen.append((exporting(), exporting_symbolic_grid(), select_window_kernel('auto', x.device, 1 << 22, False),
                     select_linear_kernel('auto', x.device, 1 << 22, False)))
        return x + 1

    torch._dynamo.reset()
    torch.compile(probe, backend='eager', fullgraph=True)(torch.zeros(1))
    assert seen == [(False, False, 'compile', 'fused')]

    masked = []
    real = window_mod.masked_window_attention
    monkeypatch.setattr(window_mod, 'masked_window_attention', lambda *a, **k: masked.append(1) or real(*a, **k))
    torch.manual_seed(0)
    mixer = WindowAttention(32, 2, num_prefix_tokens=1, window_size=2, kernel='compile').eval()
    x = tokens()
    with torch.inference_mode():
        out = torch.compile(mixer, backend='eager', fullgraph=True)(x, GRID)
        reference = mixer.proj(mixer.attend(mixer.qkv(x), GRID, None, 'torch'))
    torch._dynamo.reset()
    assert masked == []
    torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-6)


def test_a_compiled_rope_model_compiles_once_and_in_one_graph():
    """A RoPE model under torch.compile(fullgraph=True) (torch 2.11's dynamo could not trace the RoPE cache's old
    ``__dict__.setdefault``): one graph, and no second compile on later calls (a cache lookup in the graph was
    guarded on and compiled the model again once the cache filled)."""
    from jetvit_mm.models import JetViT

    torch.manual_seed(0)
    from jetvit_mm.models.mixers import default_mixers

    model = JetViT('dinov3_vits16', arch='LWF', embed_dim=32, depth=3, num_heads=2,
                   mixers=default_mixers(W=dict(window_size=2))).eval()
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    x = torch.randn(1, 3, 64, 64)
    torch._dynamo.reset()
    with torch.inference_mode():
        compiled = torch.compile(model, backend=keep, fullgraph=True)
        outs = [compiled(x)[0] for _ in range(3)]
        reference = model(x)[0]
    torch._dynamo.reset()
    assert len(graphs) == 1, f'{len(graphs)} graphs: compiled again'
    for out in outs:
        torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- L: the Triton kernels as a custom op

OP = 'jetvit::linear_attention_triton'


def linear_mixer(conv: str, prefix: int = 5, kernel: str = 'triton') -> torch.nn.Module:
    from jetvit_mm.models.mixers import LinearAttention

    torch.manual_seed(0)
    mixer = LinearAttention(32, 2, num_prefix_tokens=prefix, conv=conv, kernel=kernel)
    with torch.no_grad():
        for p in mixer.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    return mixer.eval()


def case_fake_implementation() -> None:
    """The op's fake implementation: shapes and dtype from fake inputs, no kernel run, no real memory."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from jetvit_mm.models.mixers.kernels import triton_linear_attention

    assert hasattr(torch.ops.jetvit, 'linear_attention_triton'), f'{OP} is not registered'
    mixer = linear_mixer('squeeze')
    weights = mixer.kernel_conv_weights()
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        for dtype in (torch.float32, torch.bfloat16):
            qkv = torch.empty(3, 5 + 15, 96, dtype=dtype)
            out = triton_linear_attention(qkv, None, None, 2, 5, 1e-6, None, True, conv_weights=weights,
                                          grid_size=(3, 5))
            assert out.shape == (3, 20, 32) and out.dtype == dtype, (out.shape, out.dtype)
            assert isinstance(out, torch._subclasses.fake_tensor.FakeTensor) and out.fake_mode is mode
    with torch.no_grad():
        qkv = torch.randn(2, 5 + 15, 96)
        torch.library.opcheck(torch.ops.jetvit.linear_attention_triton.default,
                              (qkv, None, None, mixer.conv.fc2.bias.view(32, 1, 3, 3).contiguous(), None, None, None,
                               2, 5, 1e-6, None, True, 3, 5), test_utils=('test_schema', 'test_faketensor'))


def graphs_of(module: torch.nn.Module, *args) -> tuple:
    """``module(*args)`` compiled with ``fullgraph=True`` by a backend that keeps dynamo's graphs and runs them as
    they are: (the output, the graphs' code)."""
    graphs = []

    def keep(gm: torch.fx.GraphModule, example_inputs) -> Callable:
        graphs.append(gm.code)
        return gm.forward

    torch._dynamo.reset()
    with torch.inference_mode():
        out = torch.compile(module, backend=keep, fullgraph=True)(*args)
    return out, graphs


def case_compiled_mixer_keeps_the_op() -> None:
    """A compiled mixer set to 'triton' calls the op (every conv kind), with the torch path's values."""
    for conv in ('squeeze', 'static', 'token', 'none'):
        mixer, reference = linear_mixer(conv), linear_mixer(conv, kernel='torch')
        x = torch.randn(2, 5 + 3 * 5, 32, generator=torch.Generator().manual_seed(1))
        out, graphs = graphs_of(mixer, x, (3, 5))
        code = '\n'.join(graphs)
        assert 'jetvit.linear_attention_triton' in code, f'{conv}: the op is not in the compiled graph:\n{code}'
        assert 'relu' not in code, f'{conv}: the torch formula was traced beside the op:\n{code}'
        with torch.inference_mode():
            torch.testing.assert_close(out, reference(x, (3, 5)), rtol=1e-5, atol=1e-5)


def case_compiled_model_keeps_the_op() -> None:
    """A tiny LWF JetViT with L on 'triton', compiled whole: one graph, the op once per L layer."""
    from jetvit_mm.models import JetViT

    torch.manual_seed(0)
    from jetvit_mm.models.mixers.table import default_mixers

    kw = dict(model_name='dinov3_vits16', depth=3, embed_dim=32, num_heads=2, arch='LWL')
    window = dict(window_size=2, kernel='torch')
    model = JetViT(**kw, mixers=default_mixers(W=window, L=dict(kernel='triton'))).eval()
    reference = JetViT(**kw, mixers=default_mixers(W=window, L=dict(kernel='torch'))).eval()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(1, 3, 48, 80)
    out, graphs = graphs_of(model, x)
    assert len(graphs) == 1 and graphs[0].count('jetvit.linear_attention_triton') == 2, graphs
    with torch.inference_mode():
        expected = reference(x)
    for a, b in zip(out if isinstance(out, (list, tuple)) else [out], expected if isinstance(expected, (list, tuple))
                    else [expected]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


INTERPRETED = {'fake_implementation': case_fake_implementation,
               'compiled_mixer_keeps_the_op': case_compiled_mixer_keeps_the_op,
               'compiled_model_keeps_the_op': case_compiled_model_keeps_the_op}


@pytest.fixture(scope='module')
def interpreted_results() -> Dict[str, Optional[str]]:
    """The cases above, run in one fresh interpreter with ``TRITON_INTERPRET=1``: {case: None or the failure}."""
    return interpreted('test_fast_paths_in_graphs')


@pytest.mark.parametrize('case', list(INTERPRETED))
@pytest.mark.integration
def test_the_triton_kernels_are_a_custom_op_a_compiled_graph_keeps(interpreted_results, case):
    assert interpreted_results[case] is None, interpreted_results[case]


if __name__ == '__main__':  # the Triton cases, run by ``interpreted_results`` under TRITON_INTERPRET=1
    report_cases(INTERPRETED)
