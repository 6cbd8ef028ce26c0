"""Which path a mixer takes, and how often it decides (issue #30 item 5, #31 item 5):

- with grad enabled (training), the paths that have a backward are kept: L's Triton path (its Triton backward, ReLU
  features only) and W's FlexAttention on CUDA; every other path gives way to the torch path;
- the choice is resolved once per mixer and (kernel option, device, dtype, grad mode, ...), not on every forward,
  and no forward scans the parameters' ``requires_grad``.
"""
import pytest
import torch

from jetvit_mm.models.mixers import LinearAttention, WindowAttention
from jetvit_mm.models.mixers import linear as linear_module
from jetvit_mm.models.mixers import window as window_module
from jetvit_mm.models.mixers.kernels import (
    AUTO_COMPILE_MIN_ELEMENTS,
    dispatch,
    select_linear_kernel,
    select_window_kernel,
)

GRID = (4, 6)
BIG = AUTO_COMPILE_MIN_ELEMENTS


@pytest.fixture
def cuda_present(monkeypatch):
    """Triton and FlexAttention reported available for CUDA tensors (no GPU here: only the choice is checked; the
    kernels' results on a GPU are the device check's, jetvit_mm/benchmark/kernel_check.py)."""
    monkeypatch.setattr(dispatch, 'triton_available', lambda device_type: device_type == 'cuda')
    monkeypatch.setattr(dispatch, 'flex_available', lambda device_type: device_type == 'cuda')


def test_training_keeps_the_paths_that_have_a_backward(cuda_present):
    cuda, cpu = torch.device('cuda'), torch.device('cpu')
    assert select_linear_kernel('auto', cuda, BIG, needs_grad=True) == 'triton'
    assert select_linear_kernel('triton', cuda, BIG, needs_grad=True) == 'triton'
    assert select_linear_kernel('auto', cuda, BIG, needs_grad=True, trainable_triton=False) == 'torch'  # focusing
    assert select_window_kernel('auto', cuda, BIG, needs_grad=True) == 'flex'
    assert select_window_kernel('flex', cuda, BIG, needs_grad=True) == 'flex'
    assert select_window_kernel('auto', cuda, BIG, needs_grad=True, dropout=True) == 'torch'  # Flex has no dropout
    for select, kernel in ((select_linear_kernel, 'compile'), (select_window_kernel, 'compile'),
                           (select_window_kernel, 'flex')):  # inference paths; Flex has no CPU backward
        assert select(kernel, cpu, BIG, needs_grad=True) == 'torch', kernel
    assert select_window_kernel('compile', cuda, BIG, needs_grad=True) == 'torch'


def counting(monkeypatch, module, name):
    calls = []
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *args, **kwargs: calls.append(args) or original(*args, **kwargs))
    return calls


@pytest.mark.parametrize('cls,module,name', [(LinearAttention, linear_module, 'select_linear_kernel'),
                                             (WindowAttention, window_module, 'select_window_kernel')])
def test_the_choice_is_resolved_once_per_device_dtype_and_grad_mode(monkeypatch, cls, module, name):
    calls = counting(monkeypatch, module, name)
    mixer = cls(32, 2, num_prefix_tokens=1)
    x = torch.randn(2, 1 + GRID[0] * GRID[1], 32)
    with torch.no_grad():
        for _ in range(3):
            mixer(x, GRID)
    assert len(calls) == 1
    for _ in range(3):
        mixer(x, GRID).sum().backward()
    assert len(calls) == 2  # grad enabled: a key of its own
    mixer.bfloat16()
    with torch.no_grad():
        for _ in range(2):
            mixer(x.bfloat16(), GRID)
    assert len(calls) == 3
    mixer.kernel = 'torch'  # the option is part of the key: changed, it is resolved afresh
    with torch.no_grad():
        mixer(x.bfloat16(), GRID)
    assert len(calls) == 4 and calls[-1][0] == 'torch'


@pytest.mark.parametrize('cls', [LinearAttention, WindowAttention])
def test_no_forward_scans_the_parameters(monkeypatch, cls):
    mixer = cls(32, 2, num_prefix_tokens=1)
    scans = counting(monkeypatch, mixer, 'parameters')
    x = torch.randn(2, 1 + GRID[0] * GRID[1], 32)  # grad enabled, the input needing none: a parameter's might
    for _ in range(2):
        mixer(x, GRID)
    assert scans == []
