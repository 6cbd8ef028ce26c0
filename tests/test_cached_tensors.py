"""What a forward keeps for later forwards is made of plain tensors, and no tensor of a forward is made on the CPU for
an input elsewhere (issue 39, the first GPU run):

- a forward under ``torch.inference_mode`` (a validation pass) filled FlexAttention's block-mask cache with inference
  tensors, and the training step after it could not save them for backward: Flex's backward failed its self-check
  and W trained on the torch path for the rest of the process. The same holds for every other cache a forward fills
  (RoPE embeds, L's rotation tables, the clustering's index tensors);
- timm builds DINOv3's RoPE coordinates on the CPU, a host-to-device copy inside every compiled forward, which CUDA
  graph capture refuses. Checked without a GPU: every tensor made during a forward on the meta device is recorded.
"""
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from jetvit_mm.models.jetvit import JetViT
from jetvit_mm.models.mixers import WindowAttention
from jetvit_mm.models.mixers import window as window_module
from jetvit_mm.models.mixers.kernels import linear_fused, window_flex
from jetvit_mm.models.mixers.kernels.availability import flex_available
from jetvit_mm.models.token_reduction import neighbour_index
from jetvit_mm.process_state import reset_caches

GRID = (5, 7)


@pytest.fixture(autouse=True)
def fresh_caches():
    reset_caches()
    yield
    reset_caches()


def tiny_dinov3(**kwargs) -> JetViT:
    torch.manual_seed(0)
    return JetViT('dinov3_vits16', arch='LWF', embed_dim=32, depth=3, num_heads=2, **kwargs)


def cached_tensors(value) -> list:
    """Every tensor inside a cache entry (a tensor, a BlockMask, a tuple of them)."""
    if isinstance(value, torch.Tensor):
        return [value]
    fields = vars(value).values() if hasattr(value, '__dict__') else value
    return [t for t in tree_leaves(list(fields)) if isinstance(t, torch.Tensor)]


@pytest.mark.skipif(not flex_available('cpu'), reason='FlexAttention needs torch.compile (a C++ compiler)')
def test_a_validation_forward_leaves_the_flex_path_trainable(monkeypatch):
    """The GPU run's sequence on the CPU: a forward on the 'flex' path under inference_mode, then what a training
    step saves for backward from the kept tensors. FlexAttention has no backward on the CPU, so its block mask is
    checked to hold plain tensors, and the window-major gather (the same cache: its index is saved for backward)
    runs its backward. FlexAttention runs eagerly here (no compile time)."""
    monkeypatch.setattr(window_module, 'compiled', lambda fn, shape=None: fn)
    torch.manual_seed(0)
    mixer = WindowAttention(32, 2, num_prefix_tokens=5, window_size=3, kernel='flex').eval()
    x = torch.randn(2, 5 + GRID[0] * GRID[1], 32)
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message='flex_attention called without torch.compile')
        warnings.simplefilter('error', RuntimeWarning)  # a failed self-check warns
        with torch.inference_mode():
            mixer(x, GRID, tiny_dinov3().rope_embed(GRID))
    assert {key[0] for key in window_flex._CACHE} == {'block_mask', 'token_orders'}
    for key, value in window_flex._CACHE.items():
        assert not any(t.is_inference() for t in cached_tensors(value)), key[0]
    leaf = torch.randn(2, 2, 5 + GRID[0] * GRID[1], 16, requires_grad=True)
    window_flex.window_major(leaf, window_flex.window_token_orders(GRID, (3, 3), 'cpu')[0], 5).sum().backward()
    assert leaf.grad[:, :, 5:].eq(1).all()  # every patch query gathered once


def test_the_rope_cache_filled_under_inference_mode_serves_a_backward():
    model = tiny_dinov3().eval()
    images = torch.randn(1, 3, 16 * GRID[0], 16 * GRID[1])
    with torch.inference_mode():
        model(images)
    assert model._rope_cache and not any(t.is_inference() for t in model._rope_cache.values())
    leaf = images.clone().requires_grad_()
    sum(o.sum() for o in model(leaf)).backward()  # an eval-mode model in a training step (a frozen-BN recipe)
    assert torch.isfinite(leaf.grad).all()


def test_l_rotation_tables_and_clustering_indices_kept_under_inference_mode_are_plain():
    rope = tiny_dinov3().rope_embed(GRID)
    reset_caches()
    with torch.inference_mode():
        table = linear_fused.rotation_table(rope, 5, True)
        index = neighbour_index(3, 4, torch.device('cpu'))
    assert not table.is_inference() and not index.is_inference()
    assert linear_fused.rotation_table(rope, 5, True) is table  # and it is the kept one


class DeviceRecorder(TorchDispatchMode):
    """The device of every tensor an operator returns while active."""

    def __init__(self):
        super().__init__()
        self.devices = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.devices += [(str(func), t.device.type) for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        return out


def cpu_tensors_made(fn) -> list:
    recorder = DeviceRecorder()
    with recorder:
        fn()
    return [op for op, device in recorder.devices if device == 'cpu']


@pytest.mark.parametrize('training', [False, True], ids=['eval', 'train'])
def test_a_forward_on_another_device_makes_no_cpu_tensor(training):
    """On the meta device (standing in for a GPU) a whole forward, RoPE included, makes every tensor there."""
    with torch.device('meta'):
        model = tiny_dinov3().train(training)
    images = torch.empty(1, 3, 16 * GRID[0], 16 * GRID[1], device='meta')
    with torch.no_grad():
        assert cpu_tensors_made(lambda: model(images)) == []


def test_the_compiled_branch_builds_rope_on_the_device(monkeypatch):
    """Inside torch.compile the embed is built in the graph: with CUDA graphs a CPU tensor there cannot be captured
    ("Cannot copy between CPU and CUDA tensors during CUDA graph capture"). Its values are timm's."""
    model = tiny_dinov3().eval()
    expected = model.rope.get_embed(shape=GRID)
    monkeypatch.setattr(torch.compiler, 'is_compiling', lambda: True)
    assert torch.equal(model.rope_embed(GRID), expected)
    with torch.device('meta'):
        model = tiny_dinov3().eval()
    assert cpu_tensors_made(lambda: model.rope_embed(GRID)) == []
