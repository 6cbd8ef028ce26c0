"""The fast kernels' self-check (issue #30 item 2): the first run of a fast path on a device and dtype is compared
with the torch path on an input of the call's shape; a kernel that raises or computes wrongly warns once, naming
kernel, device and error, and that device keeps the torch path (the results stay the reference's); a correct kernel
passes silently."""
import warnings

import pytest
import torch

from jetvit_mm.models import token_reduction
from jetvit_mm.models.mixers import LinearAttention, WindowAttention
from jetvit_mm.models.mixers import linear as linear_module
from jetvit_mm.models.mixers import window as window_module
from jetvit_mm.models.mixers.kernels import selfcheck
from jetvit_mm.models.token_reduction import neighbour_index
from jetvit_mm.process_state import reset_caches, set_switch

GRID = (6, 9)


@pytest.fixture(autouse=True)
def fresh_verdicts():
    reset_caches()
    yield
    reset_caches()


def pair(cls, kernel: str, **options):
    torch.manual_seed(0)
    reference = cls(32, 2, num_prefix_tokens=5, kernel='torch', **options).eval()
    with torch.no_grad():
        for p in reference.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    fast = cls(32, 2, num_prefix_tokens=5, kernel=kernel, **options).eval()
    fast.load_state_dict(reference.state_dict())
    return reference, fast


def run(mixer, x):
    with torch.inference_mode():
        return mixer(x, GRID, None)


def inputs(dtype=torch.float32):
    return torch.randn(2, 5 + GRID[0] * GRID[1], 32, generator=torch.Generator().manual_seed(1)).to(dtype)


def uncompiled(monkeypatch, module):
    """The 'compile' path without the compiler (the broken formulation runs as it is: no compile time)."""
    monkeypatch.setattr(module, 'compiled', lambda fn, shape=None: fn)


def test_a_raising_kernel_warns_once_and_the_device_keeps_the_torch_path(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError('no kernel image is available for execution on the device')

    uncompiled(monkeypatch, linear_module)
    monkeypatch.setattr(linear_module, 'fused_linear_attention', broken)
    reference, fast = pair(LinearAttention, 'compile', conv='static')
    x = inputs()
    with pytest.warns(RuntimeWarning, match=r"fast kernel 'compile' failed its self-check on cpu \(torch.float32\): "
                                           r'RuntimeError: no kernel image is available'):
        out = run(fast, x)
    assert torch.equal(out, run(reference, x))
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # once per kernel, device and dtype: no second warning
        assert torch.equal(run(fast, x), out)
    with pytest.warns(RuntimeWarning, match=r'torch.bfloat16'):  # another dtype is checked afresh
        run(fast.bfloat16(), x.bfloat16())


def test_a_wrong_kernel_is_caught_by_its_result(monkeypatch):
    def wrong(qkv_flat, table, conv, num_heads, *args):
        return torch.zeros(qkv_flat.shape[0], qkv_flat.shape[1], qkv_flat.shape[2] // 3, dtype=qkv_flat.dtype)

    uncompiled(monkeypatch, linear_module)
    monkeypatch.setattr(linear_module, 'fused_linear_attention', wrong)
    reference, fast = pair(LinearAttention, 'compile', conv='none')
    x = inputs()
    with pytest.warns(RuntimeWarning, match=r"'compile' failed its self-check on cpu .*max difference"):
        assert torch.equal(run(fast, x), run(reference, x))


def test_a_wrong_window_kernel_falls_back(monkeypatch):
    def off_by_one(*args, **kwargs):
        return window_module.window_attention(*args[:7]) + 1.0

    uncompiled(monkeypatch, window_module)
    monkeypatch.setattr(window_module, 'padded_window_attention', off_by_one)
    reference, fast = pair(WindowAttention, 'compile', window_size=4)
    x = inputs()
    with pytest.warns(RuntimeWarning, match=r"'compile' failed its self-check on cpu"):
        assert torch.equal(run(fast, x), run(reference, x))


def test_a_correct_kernel_passes_silently_and_runs():
    reference, fast = pair(LinearAttention, 'compile', conv='squeeze')
    x = inputs()
    with warnings.catch_warnings():
        warnings.simplefilter('error', RuntimeWarning)
        out = run(fast, x)
    assert selfcheck.VERDICTS == {('compile', 'cpu', torch.float32): True}
    torch.testing.assert_close(out, run(reference, x), rtol=1e-5, atol=1e-5 * out.abs().max().item())


def test_one_reset_empties_the_kernel_caches_and_an_unknown_switch_is_refused():
    selfcheck.VERDICTS[('compile', 'cpu', torch.float32)] = True
    neighbour_index(2, 3, torch.device('cpu'))
    reset_caches()
    assert not selfcheck.VERDICTS and token_reduction._kept_neighbour_index.cache_info().currsize == 0
    with pytest.raises(ValueError, match="unknown switch 'fixed_grids'; valid: fixed_grid, group_torn_down"):
        set_switch('fixed_grids', True)
