"""The fast paths inside a caller's torch.compile (issue #30 items 3 and 4).

- W on FlexAttention: the block mask (and the window-major query order) is built once per grid, window, prefix and
  device, eagerly, and kept: a second forward reuses it, and a compiled forward neither rebuilds it in its graph nor
  builds it again (``create_block_mask`` calls counted), whichever of eager and compiled runs first.
"""
from typing import List

import pytest
import torch
import torch._dynamo

from jetvit_mm.models.mixers import WindowAttention
from jetvit_mm.models.mixers import window as window_module
from jetvit_mm.models.mixers.kernels import window_flex
from jetvit_mm.models.mixers.kernels.availability import flex_available

GRID = (3, 5)  # 2 x 3 windows of 2 x 2, the last row and column padded


@pytest.fixture
def mask_builds(monkeypatch) -> List[tuple]:
    """Every ``create_block_mask`` call (its query and key lengths), with empty mask caches and dynamo caches."""
    from torch.nn.attention import flex_attention

    calls = []
    real = flex_attention.create_block_mask

    def counting(mask_mod, B, H, Q_LEN, KV_LEN, *args, **kwargs):
        calls.append((Q_LEN, KV_LEN))
        return real(mask_mod, B, H, Q_LEN, KV_LEN, *args, **kwargs)

    monkeypatch.setattr(flex_attention, 'create_block_mask', counting)
    # the eager Flex path without inductor (FlexAttention's eager fallback: same values, no compile time)
    monkeypatch.setattr(window_module, 'compiled', lambda fn: fn)
    window_flex._CACHE.clear()
    torch._dynamo.reset()
    yield calls
    window_flex._CACHE.clear()
    torch._dynamo.reset()


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
        compiled = torch.compile(mixer, backend='eager', fullgraph=True)  # the kept mask: no graph break either
        for _ in range(2):
            torch.testing.assert_close(compiled(x, GRID), first, rtol=1e-5, atol=1e-6)
    assert len(mask_builds) == 1, f'the block mask was built again: {mask_builds}'


def test_a_compiled_forward_builds_the_mask_once_outside_its_graph(mask_builds):
    mixer, x = flex_window(prefix=5), tokens(prefix=5)
    with torch.inference_mode():
        compiled = torch.compile(mixer, backend='eager')
        out = compiled(x, GRID)
        compiled(x, GRID)
        assert len(mask_builds) == 1
        reference = mixer(x, GRID)  # eager after compiled: the same kept mask
    assert len(mask_builds) == 1, f'the block mask was built again: {mask_builds}'
    torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-6)
    other = (GRID[0] + 2, GRID[1])  # another grid: one more mask
    with torch.inference_mode():
        mixer(torch.randn(1, 5 + other[0] * other[1], 32), other)
    assert len(mask_builds) == 2
