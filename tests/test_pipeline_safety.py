"""tools/pipeline.py deletes nothing it did not write, trusts a marker only with its outputs, sees the data, and
dies with its stages: at toy size (the generated segmentation task of tests/test_pipeline_tool.py, 2 iterations per
train stage, one run to the Step-1 search shared by the module), each case of issue 41 with a real second run: a
user's file in a stage folder is refused, a deleted Step-1 checkpoint reruns Step-1 distillation, a deleted
``metrics.json`` reruns the teacher's test, changed data reruns the stages that read it, and a ``kill -9`` of the
pipeline's own process leaves no stage process (nor a torchrun-like worker in its own session) while a second run is
refused as long as one lives."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from jetvit_mm.pipeline.products import MARKER

from .conftest import HANG_GUARD_S, REPO
from .test_pipeline_tool import _pipeline_args, _tiny_task

pytestmark = pytest.mark.integration  # every test here starts the pipeline or a workflow in a process

ENV = {**os.environ, 'PYTHONUNBUFFERED': '1', 'OMP_NUM_THREADS': '1'}


def _pipeline(root: Path, work: Path, *extra: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(_pipeline_args(root, work) + list(extra), cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _line(proc: subprocess.CompletedProcess, stage: str) -> str:
    """The pipeline's line saying what it did with ``stage``."""
    return next((line for line in proc.stdout.splitlines() if line.startswith(f'[pipeline] {stage}: ')
                 and 'previous outputs' not in line), '')


def _processes(*needles: str) -> list:
    """Live processes whose command line holds every one of ``needles``."""
    found = []
    for entry in os.listdir('/proc'):
        try:
            cmdline = Path(f'/proc/{entry}/cmdline').read_bytes().replace(b'\0', b' ').decode(errors='replace')
        except (OSError, ValueError):
            continue
        if entry.isdigit() and all(n in cmdline for n in needles) and int(entry) != os.getpid():
            found.append(int(entry))
    return found


def _wait_for(condition, seconds: float = 600) -> bool:
    deadline = time.time() + seconds
    while not condition() and time.time() < deadline:
        time.sleep(0.2)
    return condition()


@pytest.fixture(scope='module')
def finished(tmp_path_factory):
    """One pipeline run to the Step-1 search on the generated task (the teacher's probe and test, Step-1
    distillation and search): (root, work dir). The whole method's run: tests/test_pipeline_tool.py."""
    root = _tiny_task(tmp_path_factory.mktemp('pipeline'))
    _pipeline(root, root / 'w', '--until', 'step1_search')
    return root, root / 'w'


def test_a_users_file_in_a_stage_folder_is_refused_before_any_work_and_kept(tmp_path):
    root, work = _tiny_task(tmp_path), tmp_path / 'w'
    notes = work / 'probe_teacher' / 'my_notes.txt'
    notes.parent.mkdir(parents=True)
    notes.write_text('mine')
    proc = _pipeline(root, work, '--until', 'probe_teacher', check=False)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f'stage probe_teacher would rewrite {work}/probe_teacher, which holds files this workflow did not write ' \
           '(my_notes.txt)' in proc.stderr and '--overwrite' in proc.stderr
    assert notes.read_text() == 'mine' and sorted(os.listdir(work)) == ['.workflow.lock', 'probe_teacher']
    _pipeline(root, work, '--until', 'probe_teacher', '--overwrite')  # replaced on request
    assert not notes.exists() and (work / 'probe_teacher' / MARKER).is_file()


def test_a_deleted_metrics_file_reruns_the_teachers_test(finished):
    """Not skipped on the word of its marker (the report, whose input the file is, then read a missing file)."""
    root, work = finished
    (work / 'test_teacher' / 'metrics.json').unlink()
    proc = _pipeline(root, work, '--until', 'test_teacher')
    assert _line(proc, 'test_teacher').endswith('its outputs are not as recorded: metrics.json is missing')
    assert 'done, skipped' in _line(proc, 'probe_teacher') and (work / 'test_teacher' / 'metrics.json').is_file()


def test_a_deleted_step1_checkpoint_reruns_step1_distillation_and_keeps_the_search_until_it_succeeds(finished):
    root, work = finished
    checkpoint = Path((work / 'step1_distill' / 'last_checkpoint').read_text().strip())
    checkpoint.unlink()
    proc = _pipeline(root, work, '--until', 'step1_search')
    assert _line(proc, 'step1_distill').endswith(f'its outputs are not as recorded: {checkpoint.name} is missing')
    assert _line(proc, 'step1_search').endswith('its inputs changed')
    assert f'[pipeline] step1_search: its previous outputs are kept in {work}/.step1_search.previous' in proc.stdout
    assert checkpoint.is_file() and (work / 'step1_search' / 'best_arch_step1.txt').is_file()
    assert not (work / '.step1_search.previous').exists() and not (work / '.step1_distill.previous').exists()


def test_changed_data_reruns_the_stages_that_read_it(finished):
    """Every val image rewritten under the same name (one pixel changed): the stages that read the data rerun."""
    root, work = finished
    for path in sorted((root / 'data' / 'leftImg8bit' / 'val').rglob('*.png')):
        image = np.array(Image.open(path))
        image[0, 0] = 255 - image[0, 0]
        Image.fromarray(image).save(path)
    proc = _pipeline(root, work, '--until', 'test_teacher')
    assert _line(proc, 'probe_teacher').endswith('its inputs changed')
    assert _line(proc, 'test_teacher').endswith('its inputs changed')


def test_kill_9_of_the_pipeline_leaves_no_stage_running_and_no_second_run_beside_one(tmp_path):
    """The pipeline's own process (not its group) killed while its probe trains: a second run started while the
    stage lives is refused, the stage's processes end, and a real second run then runs the stage."""
    root, work = _tiny_task(tmp_path), tmp_path / 'w'
    first = subprocess.Popen(_pipeline_args(root, work) + ['--until', 'probe_teacher', '--max-iters', '100000'],
                             cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait_for(lambda: _processes('tools/train.py', str(work)) or first.poll() is not None)
        assert first.poll() is None
        second = _pipeline(root, work, '--until', 'probe_teacher', check=False)
        assert second.returncode == 1 and f'{work} is in use by another run' in second.stderr
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        assert _wait_for(lambda: not _processes(str(work)), 120), f'left running: {_processes(str(work))}'
        third = _pipeline(root, work, '--until', 'probe_teacher')
        assert _line(third, 'probe_teacher').endswith('an unfinished run with other inputs')
    finally:
        first.kill()
        for pid in _processes(str(work)):  # the orphans of a pipeline that left them
            os.kill(pid, signal.SIGKILL)


AGENT = """import os, subprocess, sys, time
out = sys.argv[1]
subprocess.Popen([sys.executable, '-c', 'import os, sys, time; open(sys.argv[1], "w").write(str(os.getpid())); '
                  'time.sleep(600)', out + '/worker.pid'], start_new_session=True)  # as torchrun starts its workers
open(out + '/agent.pid', 'w').write(str(os.getpid()))
time.sleep(600)
"""
DRIVER = """import sys
from pathlib import Path
from jetvit_mm.pipeline.engine import Workflow
from jetvit_mm.pipeline.stage import Stage
work = Path(sys.argv[1])
flow = Workflow(work)
with flow.lock():
    flow.run(Stage('train', work / 'train', [sys.executable, '-c', sys.argv[2], work / 'train']))
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f'/proc/{pid}/stat').read_text()
    except OSError:
        return False
    return stat[stat.rindex(')') + 2] not in 'ZX'


def test_kill_9_of_a_workflow_ends_its_stage_and_the_workers_in_their_own_sessions(tmp_path):
    """The engine alone (no mmengine): a stage like torchrun, whose worker runs in a session of its own."""
    driver = [sys.executable, '-c', DRIVER, str(tmp_path), AGENT]
    first = subprocess.Popen(driver, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids = [tmp_path / 'train' / 'agent.pid', tmp_path / 'train' / 'worker.pid']
    try:
        assert _wait_for(lambda: all(p.is_file() and p.read_text() for p in pids) or first.poll() is not None, 120)
        agent, worker = (int(p.read_text()) for p in pids)
        second = subprocess.run(driver, capture_output=True, text=True, timeout=120)
        assert second.returncode == 1 and 'is in use by another run' in second.stderr
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        assert _wait_for(lambda: not _alive(agent) and not _alive(worker), 60)
    finally:
        first.kill()
        for pid in [int(p.read_text()) for p in pids if p.is_file() and p.read_text()]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
