"""`tools/benchmark.py distill-kernels` (issue #39 item 3): the distillation step on the fast and the torch mixer
paths side by side for several archs (L alone, W alone, the 2F hybrid) in one interleaved run, in bf16 (autocast) or
fp32, each arch's ratio, its losses and the paths its fast student's mixers resolved. Tiny models on the CPU: the
plumbing, not a speed (the speed is a GPU figure)."""
import json

import pytest

from jetvit_mm.benchmark.distill_kernels import distill_kernels_benchmark
from jetvit_mm.models.mixers import default_mixers

from .conftest import run_tool

TINY = dict(depth=2, embed_dim=32, num_heads=2, mixers=default_mixers(W=dict(window_size=2)))


def test_every_arch_on_both_paths_in_one_run_in_bf16():
    result = distill_kernels_benchmark('dinov3_vits16', ('all-L', 'all-W', '2F'), (32, 32), 1, 'cpu', warmup=0,
                                       repeat=1, dtype='bf16', fast_mode='eager', **TINY)
    assert result['archs'] == ['LL', 'WW', 'LF']  # 2F at depth 2: F at the last layer
    names = [f'{arch} {variant}' for arch in result['archs'] for variant in ('torch', 'fast')]
    assert list(result['stats']) == names and all(len(result['samples_ms'][n]) == 1 for n in names)
    assert set(result['ratio_median']) == set(result['archs']) and result['autocast'] and result['dtype'] == 'bf16'
    assert all(len(result['first_losses'][n]) == 1 for n in names)
    # on the CPU with grad, eager: the fast students fall to the torch paths (no CPU backward), as resolved
    assert result['fast_paths'] == {'LL': {'L': ['torch'], 'W': []}, 'WW': {'L': [], 'W': ['torch']},
                                    'LF': {'L': ['torch'], 'W': []}}


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="unknown dtype 'fp16'; valid: 'fp32', 'bf16'"):
        distill_kernels_benchmark(dtype='fp16')
    with pytest.raises(ValueError, match="unknown fast_mode 'jit'; valid: 'auto', 'eager', 'compiled'"):
        distill_kernels_benchmark(fast_mode='jit')
    with pytest.raises(ValueError, match=r"arch 'LX' has invalid letter\(s\): 'X' at layer 1; valid letters: 'F', "
                                         r"'L', 'W' \(or a shortcut: teacher, 2F, all-L, all-W\)"):
        distill_kernels_benchmark(archs=('all-L', 'LX'), **TINY)


@pytest.mark.integration
def test_tool_distill_kernels_writes_its_json(tmp_path):
    out = tmp_path / 'distill.json'
    proc = run_tool('benchmark.py', 'distill-kernels', '--depth', '2', '--arch', 'all-L', '--arch', 'LW', '--size',
                    '32', '32', '--batch', '1', '--warmup', '0', '--repeat', '1', '--fast-mode', 'eager', '--json',
                    out, env={'OMP_NUM_THREADS': '1'})
    result = json.loads(out.read_text())
    assert result['command'] == 'distill-kernels' and result['args']['dtype'] == 'bf16'
    assert list(result['stats']) == ['LL torch', 'LL fast', 'LW torch', 'LW fast']
    assert 'bf16 (autocast)' in proc.stdout and 'LW: fast paths (eager) x' in proc.stdout
