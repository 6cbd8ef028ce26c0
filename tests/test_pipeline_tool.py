"""tools/pipeline.py and its workflow engine (jetvit_mm.pipeline.engine): a stage done with the same inputs is skipped,
a changed input reruns it and every stage after it, a killed stage resumes (a train stage with --resume), --plan
prints the commands and estimates and runs nothing, and the whole method on the generated segmentation task, killed
in the middle of a stage and resumed, gives the report an uninterrupted run gives."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from jetvit_mm.pipeline.engine import Workflow
from jetvit_mm.pipeline.products import MARKER
from jetvit_mm.pipeline.stage import FileText, Join, Stage

from .conftest import HANG_GUARD_S, REPO, run_tool

pytestmark = pytest.mark.integration  # every test here starts a process (a tool, torchrun, a stage)

DEMO_DISTILL = REPO / 'configs' / 'demo' / 'distill_supernet_context_seg.py'


def _counting_stage(tmp_path: Path, name: str, source: Path, deps=(), calls=None) -> Stage:
    """An in-process stage copying ``source`` (an input it names) into its folder, counting its runs."""
    out = tmp_path / name

    def action(stage):
        calls.append(name)
        (out / 'out.txt').write_text(source.read_text() + name)
    return Stage(name, out, ['copy', source], deps=deps, action=action)


def test_stage_is_skipped_when_done_and_reruns_with_everything_after_a_changed_input(tmp_path):
    src = tmp_path / 'input.txt'
    src.write_text('a')
    calls = []

    def stages():
        first = _counting_stage(tmp_path, 'first', src, calls=calls)
        second = _counting_stage(tmp_path, 'second', tmp_path / 'first' / 'out.txt', deps=['first'], calls=calls)
        return [first, second]

    Workflow(tmp_path, log=lambda m: None).run_all(stages())
    assert calls == ['first', 'second'] and (tmp_path / 'second' / 'out.txt').read_text() == 'afirstsecond'
    Workflow(tmp_path, log=lambda m: None).run_all(stages())
    assert calls == ['first', 'second']  # same inputs: both skipped
    time.sleep(0.01)
    src.write_text('b')  # a changed input file: the stage and the one after it rerun
    Workflow(tmp_path, log=lambda m: None).run_all(stages())
    assert calls == ['first', 'second'] * 2 and (tmp_path / 'second' / 'out.txt').read_text() == 'bfirstsecond'
    changed = stages()
    changed[1].command = ['copy', tmp_path / 'first' / 'out.txt', '--flag']  # a changed argument: that stage only
    Workflow(tmp_path, log=lambda m: None).run_all(changed)
    assert calls == ['first', 'second'] * 2 + ['second']


def test_a_stage_naming_its_own_output_file_is_skipped_after_it_wrote_it(tmp_path):
    """``tools/test.py ... --out <its folder>/metrics.json``: the output is no input of the stage."""
    calls = []

    def stage():
        out = tmp_path / 'test'
        return Stage('test', out, ['test', '--out', out / 'metrics.json'],
                     action=lambda s: calls.append((out / 'metrics.json').write_text('{}')))
    for _ in range(2):
        Workflow(tmp_path, log=lambda m: None).run(stage())
    assert len(calls) == 1


def test_a_script_that_names_base_is_fingerprinted_by_its_text(tmp_path):
    """Only a config (a module-level ``_base_ = ...``) is read with its bases merged: a script whose docstring names
    ``configs/probe/dinov3_base_linear_*.py`` is not executed, and its fingerprint is its text's, the same in every
    process (it was a digest of the executed module's objects, whose text changed from run to run)."""
    from jetvit_mm.pipeline.inputs import file_fingerprint

    script = tmp_path / 'tool.py'
    script.write_text('"""scores configs/probe/dinov3_base_linear_cityscapes.py"""\nmarker = object()\n')
    digest = hashlib.sha256(script.read_text().encode()).hexdigest()[:16]
    assert file_fingerprint(script) == ['text', digest]


def test_a_failed_stage_leaves_no_marker_and_reruns_from_a_clean_folder(tmp_path):
    def fail(stage):
        (stage.out_dir / 'half_written.pth').write_text('x')
        raise RuntimeError('killed')

    wf = Workflow(tmp_path, log=lambda m: None)
    with pytest.raises(RuntimeError, match='killed'):
        wf.run(Stage('s', tmp_path / 's', ['x'], action=fail))
    assert not (tmp_path / 's' / MARKER).exists()
    ran = wf.run(Stage('s', tmp_path / 's', ['x'], action=lambda stage: None))
    assert ran and not (tmp_path / 's' / 'half_written.pth').exists() and (tmp_path / 's' / MARKER).is_file()


@pytest.mark.integration  # the stages are processes
def test_a_killed_stage_resumes_with_its_resume_flag(tmp_path):
    """A stage killed after writing its checkpoint marker (here: a process that writes ``last_checkpoint`` and is
    killed) starts again with ``--resume``; one killed before starts afresh; one done is skipped."""
    script = ('import sys, os, pathlib; out = pathlib.Path(sys.argv[1]); '
              '(out / "runs.txt").open("a").write(" ".join(sys.argv[2:]) + "\\n"); '
              '(out / "last_checkpoint").write_text("iter_1.pth"); '
              'os.kill(os.getpid(), 9) if "--resume" not in sys.argv else None')
    out = tmp_path / 'train'
    stage = Stage('train', out, [sys.executable, '-c', script, out, '--lr', '1'], resume_flag='--resume',
                  resume_file='last_checkpoint')
    with pytest.raises(RuntimeError, match='stage train failed'):
        Workflow(tmp_path, log=lambda m: None).run(stage)
    assert not (out / MARKER).exists()
    assert Workflow(tmp_path, log=lambda m: None).run(stage)
    assert (out / 'runs.txt').read_text().splitlines() == ['--lr 1', '--lr 1 --resume']
    assert not Workflow(tmp_path, log=lambda m: None).run(stage)  # done: skipped
    changed = Stage('train', out, [sys.executable, '-c', script, out, '--lr', '2'], resume_flag='--resume',
                    resume_file='last_checkpoint')
    with pytest.raises(RuntimeError):  # other inputs: never resumed from the old run, started afresh
        Workflow(tmp_path, log=lambda m: None).run(changed)
    assert (out / 'runs.txt').read_text().splitlines() == ['--lr 2']


def test_upstream_outputs_as_arguments(tmp_path):
    arch = tmp_path / 'best_arch.txt'
    args = ['--arch', FileText(arch), Join('model.ckpt=', tmp_path, '/hybrid_', FileText(arch), '.pth')]
    stage = Stage('s', tmp_path / 's', args)
    assert stage.shell().splitlines()[-1] == f'--arch $(cat {arch}) "model.ckpt={tmp_path}/hybrid_$(cat {arch}).pth"'
    with pytest.raises(FileNotFoundError, match='best_arch.txt: not written'):
        stage.argv()
    arch.write_text('LWF\n')
    assert stage.argv() == ['--arch', 'LWF', f'model.ckpt={tmp_path}/hybrid_LWF.pth']


def _plan(work: Path, *extra: str) -> str:
    return run_tool('pipeline.py', DEMO_DISTILL, '--teacher', REPO / 'README.md', '--work-dir', work,
                    '--data-root', work.parent, '--plan', *extra).stdout


def test_plan_prints_every_command_and_estimate_and_runs_nothing(tmp_path):
    work = tmp_path / 'w'
    text = _plan(work)
    assert not work.exists()  # nothing ran, nothing written
    for i, name in enumerate(('probe_teacher', 'test_teacher', 'step1_distill', 'step1_search', 'step2_distill',
                              'step2_search', 'finetune', 'probe_hybrid', 'test_hybrid', 'report'), 1):
        assert f'# [{i}] {name}: runs' in text
    assert f'tools/train.py {REPO}/configs/demo/probe_context_seg.py --work-dir {work}/probe_teacher' in text
    # the Step-1 winner goes to Step 2 as the command line a user would paste
    assert f'"model.student.step1_arch=$(cat {work}/step1_search/best_arch_step1.txt)"' in text
    assert f'--step1-arch $(cat {work}/step1_search/best_arch_step1.txt) --max-full 2 --export' in text
    # the estimate: the config's iterations (the demo's probe: 300, distillation: 600) x a step time
    assert '# [1] probe_teacher: runs; estimate: 300 iterations x unknown step time' in text
    assert '# [3] step1_distill: runs; estimate: 600 iterations x unknown step time' in text
    proc = run_tool('pipeline.py', DEMO_DISTILL, '--teacher', REPO / 'README.md', '--work-dir', work, '--plan',
                    '--task', 'segm', check=False)
    assert proc.returncode == 2 and "invalid choice: 'segm'" in proc.stderr


def test_plan_of_depth_and_detection_configs(tmp_path):
    depth = run_tool('pipeline.py', REPO / 'configs' / 'depth' / 'depthanything_large_distill.py', '--teacher',
                     REPO / 'README.md', '--work-dir', tmp_path / 'd', '--plan').stdout
    assert 'tools/convert_depth_anything.py' in depth and '--metric da2k_acc' in depth
    assert 'depthanything_large_distill_step2.py' in depth and 'depthanything_large_pseudolabel_finetune.py' in depth
    det = run_tool('pipeline.py', REPO / 'configs' / 'jetvit' / 'dinov3_base_cityscapes.py', '--task', 'det',
                   '--teacher', REPO / 'README.md', '--work-dir', tmp_path / 'x', '--plan').stdout
    assert 'mask_rcnn_jetvit_dinov3_base_coco.py' in det and '--metric coco/bbox_mAP' in det


def _tiny_task(root: Path) -> Path:
    """The generated segmentation task (a few images) and a random teacher of the demo's backbone."""
    from jetvit_mm.demo.context_seg import make_context_seg
    from jetvit_mm.models import JetViT

    make_context_seg(root / 'data', splits={'train': 4, 'val': 2}, seed=0)
    torch.manual_seed(0)
    teacher = JetViT(model_name='dinov3_vits16', embed_dim=64, depth=12, num_heads=4)
    torch.save(dict(state_dict=teacher.state_dict()), root / 'teacher.pth')
    return root


def _pipeline_args(root: Path, work: Path) -> list:
    return [sys.executable, str(REPO / 'tools' / 'pipeline.py'), str(DEMO_DISTILL), '--teacher',
            str(root / 'teacher.pth'), '--work-dir', str(work), '--data-root', str(root / 'data'), '--max-iters', '2',
            '--beam-width', '1', '--device', 'cpu']


def _deterministic(report: dict) -> tuple:
    return (report['step1_arch'], report['step2_arch'], [(r['arch'], r['metrics']) for r in report['rows']],
            [(r['arch'], r['score'], r['stage']) for r in report['search_archs']])


def test_pipeline_killed_midway_resumes_to_the_report_of_an_uninterrupted_run(tmp_path):
    """The method end to end at 2 iterations per train stage: killed (SIGKILL to its process group) as soon as the
    fine-tune stage's folder appears, resumed (the stages before are skipped), and its report equals the one of an
    uninterrupted run of the same stages (the same work dir with the fine-tune and later stages removed)."""
    root, work = _tiny_task(tmp_path), tmp_path / 'w'
    env = {**os.environ, 'PYTHONUNBUFFERED': '1', 'OMP_NUM_THREADS': '1'}
    proc = subprocess.Popen(_pipeline_args(root, work), cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + HANG_GUARD_S
    while not (work / 'finetune' / 'stage.log').exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, 'the pipeline ended before the fine-tune stage'
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (work / 'finetune' / MARKER).exists() and not (work / 'report').exists()
    resumed = subprocess.run(_pipeline_args(root, work), cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=HANG_GUARD_S)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    for name in ('probe_teacher', 'test_teacher', 'step1_distill', 'step1_search', 'step2_distill', 'step2_search'):
        assert f'[pipeline] {name}: done, skipped' in resumed.stdout
    assert '[pipeline] finetune: running' in resumed.stdout
    report = json.loads((work / 'report' / 'report.json').read_text())
    for name in ('report.md', 'pareto_teacher_vs_hybrids.png', 'pareto_step1.png', 'layer_gains_step2.png'):
        assert (work / 'report' / name).stat().st_size > 0, name
    for name in ('finetune', 'probe_hybrid', 'test_hybrid', 'report'):
        shutil.rmtree(work / name)
    again = subprocess.run(_pipeline_args(root, work), cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=HANG_GUARD_S)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert _deterministic(json.loads((work / 'report' / 'report.json').read_text())) == _deterministic(report)
    assert report['step2_arch'].count('F') <= 2 and set(report['step1_arch']) <= set('LW')
    assert 'mIoU' in report['rows'][0]['metrics'] and 'mIoU' in report['rows'][1]['metrics']
    plan = run_tool('pipeline.py', *_pipeline_args(root, work)[2:], '--plan').stdout
    assert plan.count(': skipped (done, same inputs)') == 10
