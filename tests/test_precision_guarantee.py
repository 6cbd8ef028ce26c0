"""The precision guarantee docs/guarantees.md states: bf16 and fp32 run as asked; fp16 inputs run the L core in fp32,
since ``phi(q) z`` (a sum over every token) can exceed fp16's range."""
import pytest
import torch

from jetvit_mm.models.mixers.linear import LinearAttention

DIM, HEADS, GRID = 32, 2, (16, 16)


@pytest.mark.parametrize('precision', ['fp32', 'mixed'])
def test_core_dtype_per_input_dtype(precision):
    mixer = LinearAttention(DIM, HEADS, precision=precision, kernel='torch')
    assert mixer.compute_dtype(torch.float32) == torch.float32
    assert mixer.compute_dtype(torch.float16) == torch.float32
    assert mixer.compute_dtype(torch.bfloat16) == (torch.bfloat16 if precision == 'mixed' else torch.float32)


def test_fp16_input_whose_normaliser_overflows_fp16_stays_finite():
    torch.manual_seed(0)
    mixer = LinearAttention(DIM, HEADS, precision='mixed', kernel='torch').eval()
    tokens = 1 + GRID[0] * GRID[1]
    x = torch.full((1, tokens, DIM), 16.0) + torch.randn(1, tokens, DIM)
    q, k, _ = torch.nn.functional.linear(x, mixer.qkv.weight, mixer.qkv.bias).chunk(3, dim=-1)
    z = torch.relu(k.reshape(1, tokens, HEADS, -1)).sum(1)  # what the normaliser phi(q) z sums
    normaliser = (torch.relu(q.reshape(1, tokens, HEADS, -1)) * z[:, None]).sum(-1)
    assert normaliser.max() > torch.finfo(torch.float16).max, 'the case needs a normaliser beyond fp16'
    with torch.no_grad():
        out = mixer.half()(x.half(), GRID)
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
