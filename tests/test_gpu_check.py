"""The device check (scripts/gpu_check.sh, issue #30 item 1) cannot rot: its CPU dry run writes every file the GPU run
writes, each phase passes, and what the phases report holds; the kernel check's tolerance rule rejects wrong and
non-finite outputs."""
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from jetvit_mm.benchmark.kernel_check import compare

REPO = Path(__file__).resolve().parents[1]
FILES = {'files/env.json', 'files/kernels.json', 'files/mixers_bf16.json', 'files/models_bf16.json',
         'files/models_bf16_compile.json', 'files/dist.json', 'run.log'}
PHASES = ('env', 'kernels', 'mixers', 'models', 'compile', 'dist', 'mask_rcnn')


@pytest.fixture(scope='module')
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp('gpu_check')
    env = dict(os.environ, DRY_RUN='1', PYTHON=sys.executable, OMP_NUM_THREADS='1')
    proc = subprocess.run(['bash', str(REPO / 'scripts' / 'gpu_check.sh'), str(out)], env=env, capture_output=True,
                          text=True, timeout=1500)
    return proc, out


@pytest.mark.integration
def test_dry_run_passes_every_phase_and_packs_every_file(dry_run):
    proc, out = dry_run
    log = (out / 'run.log').read_text()
    assert proc.returncode == 0, log[-6000:]
    for phase in PHASES:
        assert f'== phase {phase}: rc 0' in log, phase
    with tarfile.open(out / 'gpu_check.tgz') as tar:
        packed = {m.name for m in tar.getmembers() if m.isfile()}
    assert packed == FILES
    assert sorted(p.name for p in out.iterdir()) == ['files', 'gpu_check.tgz', 'run.log']  # 2 files come back


@pytest.mark.integration
def test_dry_run_reports(dry_run):
    _, out = dry_run
    env = json.loads((out / 'files' / 'env.json').read_text())
    assert env['torch'] == torch.__version__ and set(env['sdpa_backend']) == {'bf16', 'fp32'}
    kernels = json.loads((out / 'files' / 'kernels.json').read_text())
    assert {k['mixer'] for k in kernels} == {'L', 'model'} and all(k['ok'] for k in kernels)
    assert [k['dtype'] for k in kernels if k.get('grad')] == ['fp32']  # the backward's comparison runs too
    steps = json.loads((out / 'files' / 'dist.json').read_text())
    assert [s['wrap'] for s in steps] == ['ddp', 'fsdp2'] and all(s['finite'] and s['loss'] > 0 for s in steps)
    assert steps[1]['units'] == 2 * 4 + 1  # every block of teacher and student, and the root
    assert abs(steps[0]['loss'] - steps[1]['loss']) < 1e-6 * steps[0]['loss']  # fp32 on the CPU: the same step
    for name in ('models_bf16.json', 'models_bf16_compile.json'):  # the fair baseline's records (issue #30 item 8)
        models = json.loads((out / 'files' / name).read_text())
        teacher_layers = models['sdpa_backends']['teacher']['64x128']
        assert [layer['layer'] for layer in teacher_layers] == list(range(12)), name
        assert all(row['reference'] == 'teacher' for row in models['rows']), name


def test_the_compiled_phase_captures_cuda_graphs_on_the_gpu():
    """On the GPU the compiled models are timed as CUDA-graph replays too (--compile --cuda-graph); the dry run
    cannot show it (no CUDA graphs on the CPU), so the script's GPU settings are read."""
    script = (REPO / 'scripts' / 'gpu_check.sh').read_text()
    gpu_settings = script.split('\nelse\n', 1)[1].split('\nfi\n', 1)[0]
    assert 'graph=(--cuda-graph)' in gpu_settings
    compile_phase = script.split('phase compile ', 1)[1].split('\nphase ', 1)[0]
    assert '--compile "${graph[@]}"' in compile_phase


def test_kernel_check_tolerance_rule():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(2, 50, 16, generator=g)
    assert compare(ref.clone(), ref, ref, 'fp32')['ok']
    assert not compare(ref + 1e-3 * ref.abs().max(), ref, ref, 'fp32')['ok']
    assert not compare(torch.full_like(ref, float('nan')), ref, ref, 'fp32')['ok']
    torch_bf16 = ref.bfloat16()
    assert compare(torch_bf16.clone(), torch_bf16, ref, 'bf16')['ok']
    assert not compare((ref + 0.1 * ref.abs().max()).bfloat16(), torch_bf16, ref, 'bf16')['ok']
    assert not compare(ref.clone(), torch_bf16, ref, 'bf16')['ok']  # the path must return the input's dtype
