"""The device check (scripts/gpu_check.sh, issue #30 item 1, issue 39) cannot rot: its CPU dry run writes every file
the GPU run writes, each phase passes, and what the phases report holds; the kernel check's tolerance rule rejects
wrong and non-finite outputs, and a case whose fast path did not run fails (issue 39: on the H200 cases passed that
had compared the torch path with itself); the distributed step frees its model before the process group goes."""
import gc
import importlib.util
import json
import logging
import os
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from jetvit_mm.benchmark import kernel_check
from jetvit_mm.benchmark.kernel_check import Case, compare, run_case, run_checks
from jetvit_mm.models.mixers import linear as linear_module
from jetvit_mm.models.mixers.kernels.availability import compile_available
from jetvit_mm.process_state import reset_caches

from .conftest import HANG_GUARD_S

REPO = Path(__file__).resolve().parents[1]
FILES = {'files/env.json', 'files/kernels.json', 'files/kernels.log', 'files/mixers_bf16.json',
         'files/models_bf16.json', 'files/models_bf16_compile.json', 'files/baselines.json', 'files/distill_bf16.json',
         'files/dist_ddp.json', 'files/dist_fsdp2.json', 'run.log'}
PHASES = ('env', 'proof', 'mixers', 'models', 'teacher_c', 'baselines', 'distill', 'ddp', 'fsdp2', 'mask_rcnn')
PAPER_FILES = {'files/env.json', 'files/kernels.log', 'files/kernels_matrix.json', 'files/dinov3_b_compile.json',
               'files/dinov3_l.json', 'files/depth_l.json', 'run.log'}
PAPER_PHASES = ('env', 'kernels', 'b_compiled', 'dinov3_l', 'depth_l')
OUT_FILES = 8  # the device tool brings back at most 8 files from $OUT
CALL_BUDGET_S = 420  # the phases' budgets in all: a call's 10 minutes, less the machine's start and the transfers
needs_compile = pytest.mark.skipif(not compile_available('cpu'), reason='the compile path needs a C++ compiler')


def run_dry(script: str, out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, DRY_RUN='1', PYTHON=sys.executable, OMP_NUM_THREADS='1')
    return subprocess.run(['bash', str(REPO / 'scripts' / script), str(out)], env=env, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)


@pytest.fixture(scope='module')
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp('gpu_check')
    return run_dry('gpu_check.sh', out), out


def unpacked(out: Path, packed_name: str, tmp: Path) -> Path:
    """The tarball's files, unpacked under ``tmp``: what the phases wrote (they write nowhere else in $OUT)."""
    with tarfile.open(out / packed_name) as tar:
        tar.extractall(tmp, filter='data')
    return tmp


def assert_every_phase_passed(proc, out: Path, phases, files, packed_name: str) -> None:
    log = (out / 'run.log').read_text()
    assert proc.returncode == 0, log[-6000:]
    for phase in phases:
        assert f'== phase {phase}: rc 0' in log, phase
    with tarfile.open(out / packed_name) as tar:
        packed = {m.name for m in tar.getmembers() if m.isfile()}
    assert packed == files
    came_back = sorted(p.relative_to(out).as_posix() for p in out.rglob('*') if p.is_file())
    assert came_back == sorted([packed_name, 'run.log', 'summary.json']) and len(came_back) <= OUT_FILES
    summary = json.loads((out / 'summary.json').read_text())
    assert [(p['phase'], p['outcome']) for p in summary['phases']] == [(phase, 'passed') for phase in phases]


@pytest.mark.integration
def test_dry_run_passes_every_phase_and_brings_back_three_files(dry_run):
    assert_every_phase_passed(*dry_run, PHASES, FILES, 'gpu_check.tgz')


@pytest.mark.integration
def test_the_paper_rows_dry_run_passes_every_phase(tmp_path):
    out = tmp_path / 'out'
    proc = run_dry('gpu_check_paper.sh', out)
    assert_every_phase_passed(proc, out, PAPER_PHASES, PAPER_FILES, 'gpu_check_paper.tgz')
    files = unpacked(out, 'gpu_check_paper.tgz', tmp_path / 'unpacked') / 'files'
    depth = json.loads((files / 'depth_l.json').read_text())
    assert [r['label'] for r in depth['rows']][:1] == ['teacher'] and depth['args']['head'] == 'dpt'
    assert all(r['throughput_batch'] == 2 for r in depth['rows'])  # images/s at the throughput batch


def planned(script: str) -> dict:
    """Each phase's budget in seconds on the GPU, as ``--plan`` prints it, and the total it prints."""
    proc = subprocess.run(['bash', str(REPO / 'scripts' / script), '--plan'], capture_output=True, text=True,
                          check=True, timeout=60)
    rows = [line.split() for line in proc.stdout.splitlines()[1:] if line[:1].strip()]
    return {row[0]: int(row[1].rstrip('s')) for row in rows}


@pytest.mark.integration
def test_each_device_check_plans_its_phases_within_one_call():
    """Issue 46: each check fits one call of the device tool, cold compiles included: ``--plan`` lists the phases in
    the order they run, and their budgets sum to at most 420 s."""
    for script, phases in (('gpu_check.sh', PHASES), ('gpu_check_paper.sh', PAPER_PHASES)):
        budgets = planned(script)
        total = budgets.pop('total')
        assert tuple(budgets) == phases, script
        assert total == sum(budgets.values()) <= CALL_BUDGET_S, script


@pytest.mark.integration
def test_dry_run_reports(dry_run, tmp_path):
    _, out = dry_run
    files = unpacked(out, 'gpu_check.tgz', tmp_path) / 'files'
    env = json.loads((files / 'env.json').read_text())
    assert env['torch'] == torch.__version__ and set(env['sdpa_backend']) == {'bf16', 'fp32'}
    kernels = json.loads((files / 'kernels.json').read_text())  # the production cases first (--production)
    assert [(k['mixer'], k['grad'], k['autocast']) for k in kernels] == [
        ('L', False, False), ('W', False, False), ('model', False, False), ('model', True, False),
        ('model', True, True)]
    assert all(k['ok'] and k['dtype'] == 'bf16' for k in kernels)
    assert [k['paths'] for k in kernels if k['mixer'] != 'model'] == [['L:compile'], ['W:flex']]  # what ran
    lines = (files / 'kernels.log').read_text().splitlines()  # a line per case, written as it ended
    assert [line.split()[1].rstrip(':') for line in lines] == [k['name'] for k in kernels]
    summary = json.loads((out / 'summary.json').read_text())  # the cases and their paths, the verdicts read
    assert [(c['case'], c['paths']) for c in summary['kernels']] == [(k['name'], k['paths']) for k in kernels]
    assert set(summary['distill']['fast_paths']) == {'LW'} and summary['baselines']
    steps = [json.loads((files / f'dist_{wrap}.json').read_text())[0] for wrap in ('ddp', 'fsdp2')]
    assert [s['wrap'] for s in steps] == ['ddp', 'fsdp2'] and all(s['finite'] and s['loss'] > 0 for s in steps)
    assert steps[1]['units'] == 2 * 4 + 1  # every block of teacher and student, and the root
    assert abs(steps[0]['loss'] - steps[1]['loss']) < 1e-6 * steps[0]['loss']  # fp32 on the CPU: the same step
    ratios = json.loads((files / 'baselines.json').read_text())  # against the eager and compiled teacher
    assert {r['run'] for r in ratios} == {'eager', 'compiled'}
    assert all('x_vs_eager_teacher' in r and 'x_vs_compiled_teacher' in r for r in ratios)
    for name in ('models_bf16.json', 'models_bf16_compile.json'):  # the fair baseline's records (issue #30 item 8)
        models = json.loads((files / name).read_text())
        teacher_layers = models['sdpa_backends']['teacher']['64x128']
        assert [layer['layer'] for layer in teacher_layers] == list(range(12)), name
        assert all(row['reference'] == 'teacher' for row in models['rows']), name
        assert all('paths' in row for row in models['rows']), name  # each arch's paths, the verdicts read
    assert set(json.loads((files / 'mixers_bf16.json').read_text())['paths']) >= {'L-squeeze auto', 'W16 auto'}


def test_the_compiled_phase_captures_cuda_graphs_on_the_gpu():
    """On the GPU the compiled teacher is timed as CUDA-graph replays too (--compile --cuda-graph); the dry run
    cannot show it (no CUDA graphs on the CPU), so the script's GPU settings are read."""
    script = (REPO / 'scripts' / 'gpu_check.sh').read_text()
    gpu_settings = script.split('\nelse\n', 1)[1].split('\nfi\n', 1)[0]
    assert 'graph=(--cuda-graph)' in gpu_settings
    models = script.split('\nmodels=(', 1)[1].split(')\n', 1)[0]
    assert '"${graph[@]}"' in models
    assert '--compile' in script.split('\nphase teacher_c ', 1)[1].split('\nphase ', 1)[0]


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


# ----------------------------------------------------------------------------- the kernel check asserts its path

def uncompiled_l(monkeypatch):
    """L's 'compile' path without the compiler (its formulation as it is: no compile time)."""
    monkeypatch.setattr(linear_module, 'compiled', lambda fn, shape=None: fn)


def l_case(dtype: str = 'fp32') -> Case:
    return Case('L', 'compile', dtype, grid=(4, 6))


@needs_compile
def test_a_case_on_its_fast_path_passes_and_names_the_path(monkeypatch):
    uncompiled_l(monkeypatch)
    result = run_case(l_case(), torch.device('cpu'))
    assert result['ok'], result
    assert result['paths'] == ['L:compile']


@needs_compile
def test_a_case_whose_fast_path_fell_back_fails(monkeypatch):
    """The fallback gives the torch path's output, so the comparison alone passes: the case must fail by its path."""
    def broken(*args, **kwargs):
        raise RuntimeError('no kernel image is available for execution on the device')

    uncompiled_l(monkeypatch)
    monkeypatch.setattr(linear_module, 'fused_linear_attention', broken)
    result = run_case(l_case(), torch.device('cpu'))
    assert result['err'] == 0 and not result['ok']  # the torch path against itself
    assert result['paths'] == ['L:torch']
    reset_caches()  # forced on purpose (tests/conftest.py fails a test that leaves one)
    assert "L ran the 'torch' path, not 'compile'" in result['error']
    assert "self-check of 'compile' failed on cpu (torch.float32)" in result['error']


@needs_compile
def test_a_dynamo_warning_fails_the_case(monkeypatch):
    """Past dynamo's recompile limit a compiled function runs eagerly, with one logged warning: the case fails."""
    fused = linear_module.fused_linear_attention

    def warned(*args, **kwargs):
        logging.getLogger('torch._dynamo.convert_frame').warning('torch._dynamo hit config.recompile_limit (8)\n...')
        return fused(*args, **kwargs)

    uncompiled_l(monkeypatch)
    monkeypatch.setattr(linear_module, 'fused_linear_attention', warned)
    result = run_case(l_case(), torch.device('cpu'))
    assert not result['ok']
    assert 'torch._dynamo.convert_frame: torch._dynamo hit config.recompile_limit (8)' in result['error']


@needs_compile
def test_fp32_cases_run_without_tf32_and_it_is_restored(monkeypatch):
    """On the H200 the whole model's fp32 input gradient was 2.1e-5 from the torch path's, against a bound of 6.1e-6,
    with TF32 left on (cuDNN's convolution backward): fp32 cases run with it off, other cases as the user set it."""
    seen = []
    compare_outputs = kernel_check._output_result

    def spy(*args):
        seen.append((torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32))
        return compare_outputs(*args)

    uncompiled_l(monkeypatch)
    monkeypatch.setattr(kernel_check, '_output_result', spy)
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        run_case(l_case('fp32'), torch.device('cpu'))
        run_case(l_case('bf16'), torch.device('cpu'))
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
        reset_caches()  # the uncompiled formulation's bf16 verdict is not under test here
    assert seen == [(False, False), (True, True)]


@needs_compile
def test_each_case_is_reported_as_it_ends_and_starts_afresh(monkeypatch):
    """A self-check verdict of one case does not carry over into the next (each case checks its own path)."""
    uncompiled_l(monkeypatch)
    reported = []

    def report(result):  # called as the case ends, before the next starts
        reported.append((result['name'], dict(kernel_check.selfcheck.VERDICTS)))
        kernel_check.selfcheck.VERDICTS[('compile', 'cpu', torch.float32)] = False  # would fail the next case

    results = run_checks(torch.device('cpu'), dtypes=('fp32',), quick=True, report=report)
    reset_caches()  # the last poisoned verdict, left by the report itself
    assert [name for name, _ in reported] == [r['name'] for r in results] and len(results) == 3
    assert reported[0][1] == {('compile', 'cpu', torch.float32): True}  # the L case's own verdict
    assert all(r['ok'] for r in results), [r.get('error') for r in results]


def test_the_case_selection_of_the_gpu_check():
    """bf16 first; of fp32 only the backward's cases (--fp32 grad); only the named kernels."""
    chosen = list(kernel_check.cases('cpu', ('bf16', 'fp32'), kernels=('auto',), fp32='grad'))
    assert [(c.name, c.grad) for c in chosen] == [
        ('model-auto-bf16-p5-b1-rotate_half-12x20', False), ('model-auto-bf16-p5-b1-rotate_half-12x20-grad', True),
        ('model-auto-fp32-p5-b1-rotate_half-12x20-grad', True)]
    with pytest.raises(ValueError, match="fp32 must be 'all' or 'grad', got 'some'"):
        list(kernel_check.cases('cpu', fp32='some'))


# ----------------------------------------------------------------------------- the distributed step's teardown

def load_tool():
    spec = importlib.util.spec_from_file_location('gpu_check_tool', REPO / 'tools' / 'gpu_check.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_the_distributed_step_frees_its_models_before_the_group_goes(monkeypatch):
    """On the H200 the FSDP2 process sat in garbage collection at exit over 10 s after its result (NCCL): its models
    are freed before the process group goes (the tool then leaves by ``os._exit`` once its output is flushed). One
    rank on gloo here, in this process."""
    import torch.distributed as dist
    from torch.distributed.fsdp import FSDPModule
    from torch.nn.parallel import DistributedDataParallel

    from jetvit_mm.models.jetvit import JetViT

    tool = load_tool()
    alive = []
    destroy = dist.destroy_process_group

    def counting_destroy(*args, **kwargs):
        kinds = (FSDPModule, DistributedDataParallel, JetViT)
        alive.append(sum(isinstance(o, kinds) for o in gc.get_objects()))
        return destroy(*args, **kwargs)

    monkeypatch.setattr(dist, 'destroy_process_group', counting_destroy)
    for name, value in dict(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(free_port()), RANK='0', WORLD_SIZE='1',
                            LOCAL_RANK='0').items():
        monkeypatch.setenv(name, value)
    assert tool.main(['dist', '--wrap', 'fsdp2', '--wrap', 'ddp']) == 0
    assert alive == [0]
