"""The search across processes: ``torchrun tools/search.py ... --launcher pytorch`` on 2 CPU ranks (gloo) scores each
arch over a data-parallel split of the val set (mmengine's distributed sampler, the evaluator's collected results),
writes the same ``search.json`` as one process, and a kill of one rank mid-stage then ``--resume`` loses nothing
and scores nothing twice."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import REPO
from .test_search import pipeline, search_args  # noqa: F401  (the module's fixture: teacher, head, supernet)

pytestmark = pytest.mark.integration  # every test here starts a process (a tool, torchrun, a stage)

PROGRESS = '[search step 1]'  # rank 0 prints one such line per arch it scores


def torchrun_cmd(*args: str) -> list:
    """``torchrun --standalone`` (a free port) of tools/search.py on 2 processes under the pytorch launcher."""
    exe = Path(sys.executable).with_name('torchrun')
    return [str(exe), '--standalone', '--nproc_per_node=2', str(REPO / 'tools' / 'search.py'), *map(str, args),
            '--launcher', 'pytorch']


def torchrun_env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1', PYTHONPATH=str(REPO))


def run(cmd: list) -> subprocess.CompletedProcess:
    """``cmd`` to its end (a loaded CPU: 3 interpreters start at once here), as each torchrun worker: one thread."""
    proc = subprocess.run(cmd, cwd=REPO, env=torchrun_env(), capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc


def one_process_search(*args: str) -> subprocess.CompletedProcess:
    return run([sys.executable, str(REPO / 'tools' / 'search.py'), *map(str, args)])


def torchrun_search(*args: str) -> subprocess.CompletedProcess:
    return run(torchrun_cmd(*args))


@pytest.fixture(scope='module')
def latency_table(tmp_path_factory) -> Path:
    """A fixed latency table: both runs cost archs alike (a measured one differs from run to run)."""
    path = tmp_path_factory.mktemp('table') / 'table.json'
    path.write_text(json.dumps({'base': 1.0, 'F': 4.0, 'L': 1.0, 'W': 2.0}))
    return path


def dist_args(p: dict, work: Path, table: Path, *extra: str) -> list:
    """The search's arguments: every arch of step 1 (no plateau), the fixed latency table; the config's val batch
    is one image (the 2 val images: one per rank)."""
    return search_args(p, work, '--min-gain', '-100', '--latency-table', table, '--device', 'cpu', *extra)


def worker_pid(launcher: subprocess.Popen, rank: int) -> int:
    """The pid of torchrun's worker of ``rank`` (its RANK variable), found among the launcher's descendants."""
    deadline = time.time() + 900
    while time.time() < deadline:
        for pid in _descendants(launcher.pid):
            try:
                env = Path(f'/proc/{pid}/environ').read_bytes().split(b'\0')
            except OSError:
                continue
            if f'RANK={rank}'.encode() in env and b'tools/search.py' in Path(f'/proc/{pid}/cmdline').read_bytes():
                return pid
        time.sleep(0.1)
    raise AssertionError(f'no worker of rank {rank} under torchrun {launcher.pid}')


def _descendants(pid: int) -> list:
    found, stack = [], [pid]
    while stack:
        parent = stack.pop()
        for task in Path(f'/proc/{parent}/task').glob('*'):
            try:
                children = [int(c) for c in (task / 'children').read_text().split()]
            except OSError:
                continue
            found += children
            stack += children
    return found


def test_two_processes_write_the_one_process_search(pipeline, latency_table, tmp_path):  # noqa: F811
    p = pipeline
    one_process_search(*dist_args(p, tmp_path / 'one', latency_table))
    proc = torchrun_search(*dist_args(p, tmp_path / 'two', latency_table))
    one = json.loads((tmp_path / 'one' / 'search.json').read_text())
    two = json.loads((tmp_path / 'two' / 'search.json').read_text())
    assert len(two['archs']) > 3 and two == one
    one_state = json.loads((tmp_path / 'one' / 'search_state.json').read_text())['stages']['1']
    two_state = json.loads((tmp_path / 'two' / 'search_state.json').read_text())['stages']['1']
    assert two_state['scores'] == one_state['scores']
    # rank 0 alone reports (and writes): one progress line per arch, not one per rank
    assert (proc.stdout + proc.stderr).count(PROGRESS) == len(two_state['scores'])


@pytest.mark.parametrize('rank', [1])
def test_killed_rank_resumes_without_rescoring(pipeline, latency_table, tmp_path, rank):  # noqa: F811
    p = pipeline
    reference = tmp_path / 'reference'
    one_process_search(*dist_args(p, reference, latency_table))
    ref = json.loads((reference / 'search_state.json').read_text())['stages']['1']

    work = tmp_path / 'killed'
    launcher = subprocess.Popen(torchrun_cmd(*dist_args(p, work, latency_table)), cwd=REPO, env=torchrun_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        victim = worker_pid(launcher, rank)
        state_file, deadline = work / 'search_state.json', time.time() + 1500
        while time.time() < deadline and launcher.poll() is None:
            if state_file.is_file() and len(json.loads(state_file.read_text())['stages']['1']['scores']) >= 3:
                break
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        assert launcher.wait(timeout=600) != 0, 'torchrun ends with a failure when a rank is killed'
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    partial = json.loads(state_file.read_text())['stages']['1']
    assert 3 <= len(partial['scores']) < len(ref['scores']), 'killed before the end'

    proc = torchrun_search(*dist_args(p, work, latency_table, '--resume'))
    final = json.loads(state_file.read_text())['stages']['1']
    scored = [arch for arch, _, _ in final['history']]
    assert len(scored) == len(set(scored)), 'an arch was scored twice'
    assert final['scores'] == ref['scores'] and final['best_arch'] == ref['best_arch']
    assert [a for a, _, _ in final['history'][:len(partial['history'])]] == [a for a, _, _ in partial['history']]
    # the resumed run scored only what the killed one had not saved
    assert (proc.stdout + proc.stderr).count(PROGRESS) == len(ref['scores']) - len(partial['scores'])
