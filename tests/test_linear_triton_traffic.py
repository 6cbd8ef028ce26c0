"""What L's Triton kernels read and how they add (issue #39 item 4), checked without running them (their values
are the interpreter tests': tests/test_fast_mixers.py, tests/test_equivalence_matrix.py and
tests/test_linear_triton_backward.py):

- the K/V-state pass adds its partial sums with relaxed atomics: nothing in that launch reads the sums, so the
  default acq_rel semantics only fenced every addition (checked on the kernel's source, what a GPU compiles);
- for bf16 inputs the kernels are given the RoPE rotation table in bf16 (half the bytes of the fp32 table), the
  fp32 table rounded; fp32 inputs keep the fp32 table.
"""
import ast

import pytest
import torch

from jetvit_mm.models.mixers import LinearAttention
from jetvit_mm.models.mixers import linear as linear_module
from jetvit_mm.models.mixers.kernels.linear_fused import rotation_table

from .conftest import REPO

KERNELS = REPO / 'jetvit_mm' / 'models' / 'mixers' / 'kernels' / 'linear_triton_kernels.py'


def test_the_kv_state_pass_adds_with_relaxed_atomics():
    source = KERNELS.read_text()  # read, not imported: Triton need not be installed
    kv_state = next(node for node in ast.walk(ast.parse(source))
                    if isinstance(node, ast.FunctionDef) and node.name == '_kv_state')
    atomics = [node for node in ast.walk(kv_state) if isinstance(node, ast.Call)
               and isinstance(node.func, ast.Attribute) and node.func.attr.startswith('atomic_')]
    assert len(atomics) == 3
    for call in atomics:
        sem = {k.arg: k.value for k in call.keywords}.get('sem')
        assert isinstance(sem, ast.Constant) and sem.value == 'relaxed', ast.unparse(call)


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float32])
def test_the_kernels_read_a_bf16_rotation_table_for_bf16_inputs(monkeypatch, dtype):
    from timm.layers import RotaryEmbeddingDinoV3

    seen = []
    monkeypatch.setattr(linear_module, 'triton_linear_attention',
                        lambda qkv, table, *a, **k: seen.append(table) or qkv[..., :qkv.shape[-1] // 3])
    mixer = LinearAttention(32, 2, num_prefix_tokens=1, kernel='torch').to(dtype)
    rope = RotaryEmbeddingDinoV3(16, temperature=100).get_embed(shape=(3, 4))
    qkv = torch.randn(2, 13, 96).to(dtype)
    with torch.no_grad():
        mixer.attend(qkv, (3, 4), rope, 'triton', dtype)
    fp32_table = rotation_table(rope, 1, True)
    assert len(seen) == 1 and seen[0].dtype == dtype
    assert torch.equal(seen[0], fp32_table.to(dtype))


@pytest.mark.parametrize('grid, prefix, depthwise, expected', [
    ((64, 128), 5, True, (128, 65, True)),  # DINOv3-B at 1024x2048: one 128-token row per program, the prefix apart
    ((32, 64), 0, True, (64, 32, True)),
    ((4, 13), 5, True, (16, 5, True)),  # 3 of 16 lanes idle: still whole rows (the interpreter cases run it)
    ((9, 17), 5, True, (64, 3, False)),  # 15 of 32 idle: fixed 64-token tiles
    ((37, 37), 5, True, (64, 22, False)),
    ((64, 512), 5, True, (64, 513, False)),  # wider than ROW_TILE_MAX
    ((64, 128), 5, False, (64, 129, False)),  # no conv in the kernel: no grid to follow
])
def test_the_q_pass_holds_one_grid_row_per_program_where_it_fits(grid, prefix, depthwise, expected):
    from jetvit_mm.models.mixers.kernels.linear_triton import q_tiles

    assert q_tiles(prefix + grid[0] * grid[1], prefix, grid, depthwise) == expected
