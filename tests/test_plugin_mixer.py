"""The example plugin (examples/pooled_attention, issue 23 item 3): a fourth mixer from outside the package,
against its own quadratic reference, and through the pipeline."""
import pytest
import torch
from timm.layers import RotaryEmbeddingDinoV3

from jetvit_mm.models.mixers import FullAttention

from .conftest import REPO

PLUGIN = REPO / 'examples' / 'pooled_attention'
DIM, HEADS, PREFIX = 32, 2, 5


@pytest.fixture
def pooled(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN))
    import jetvit_pooled
    return jetvit_pooled


def _mixer(cls, seed=0, **kwargs):
    torch.manual_seed(seed)
    return cls(dim=DIM, num_heads=HEADS, num_prefix_tokens=PREFIX, **kwargs).eval()


@pytest.mark.parametrize('grid,pool_size', [((4, 6), 2), ((5, 7), 2), ((6, 6), 3), ((3, 5), 4)])
@pytest.mark.parametrize('with_rope', [False, True])
def test_pooled_attention_matches_its_quadratic_reference(pooled, grid, pool_size, with_rope):
    mixer = _mixer(pooled.PooledAttention, pool_size=pool_size)
    x = torch.randn(2, PREFIX + grid[0] * grid[1], DIM, generator=torch.Generator().manual_seed(1))
    rope = (RotaryEmbeddingDinoV3(DIM // HEADS, temperature=100, rotate_half=True).get_embed(shape=grid)
            if with_rope else None)
    with torch.no_grad():
        out = mixer(x, grid, rope)
        ref = pooled.pooled_attention_reference(mixer, x, grid, rope)
        full = _mixer(FullAttention)(x, grid, rope)
    assert (out.double() - ref).abs().max() < 1e-5
    assert (out - full).abs().max() > 1e-3  # pooling changes the result: the comparison can fail


def test_pool_size_one_is_full_attention(pooled):
    grid = (4, 5)
    x = torch.randn(2, PREFIX + 20, DIM, generator=torch.Generator().manual_seed(2))
    rope = RotaryEmbeddingDinoV3(DIM // HEADS, temperature=100, rotate_half=True).get_embed(shape=grid)
    with torch.no_grad():
        assert torch.allclose(_mixer(pooled.PooledAttention, pool_size=1)(x, grid, rope),
                              _mixer(FullAttention)(x, grid, rope), atol=1e-6)


def test_pooling_matrix_rows_average_their_windows(pooled):
    P = pooled.pooled.pooling_matrix(1, (3, 3), 2)
    assert P.shape == (1 + 4, 1 + 9)
    assert torch.allclose(P.sum(1), torch.ones(5, dtype=P.dtype))
    assert P[1, 1:].nonzero().flatten().tolist() == [0, 1, 3, 4] and P[4, 1:].nonzero().flatten().tolist() == [8]
