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

from .conftest import HANG_GUARD_S, REPO
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
    proc = subprocess.run(cmd, cwd=REPO, env=torchrun_env(), capture_output=True, text=True, timeout=HANG_GUARD_S)
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
    deadline = time.time() + HANG_GUARD_S
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
        state_file, deadline = work / 'search_state.json', time.time() + HANG_GUARD_S
        while time.time() < deadline and launcher.poll() is None:
            if state_file.is_file() and len(json.loads(state_file.read_text())['stages']['1']['scores']) >= 3:
                break
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        assert launcher.wait(timeout=HANG_GUARD_S) != 0, 'torchrun ends with a failure when a rank is killed'
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


# ----------------------------------------------------------------------------- ranks agree or refuse; one writer
RANK_WRAPPER = '''"""tools/search.py with one argument changed on rank 1 only (another val data_root)."""
import os
import runpy
import sys

tool, old, new, *args = sys.argv[1:]
if os.environ.get('RANK') == '1':
    args = [a.replace(old, new) for a in args]
sys.argv = [tool, *args]
runpy.run_path(tool, run_name='__main__')
'''


def uncompressed_copy(root: Path, out: Path, invert: bool) -> Path:
    """The val set at ``root`` rewritten as uncompressed PNGs (its size then depends on the image size only), its
    pixels inverted when ``invert``: the same names and file sizes, other contents."""
    from PIL import Image, ImageOps
    for path in sorted(root.rglob('*.png')):
        if '/val/' not in str(path):
            continue
        target = out / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        image = Image.open(path)
        image = ImageOps.invert(image.convert('RGB')).convert(image.mode) if invert else image
        image.save(target, compress_level=0)
    return out


def sizes(root: Path) -> list:
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob('*') if p.is_file())


@pytest.mark.parametrize('other', ['same names and sizes', '24 images'])
def test_ranks_with_different_val_data_refuse_before_any_scoring(pipeline, latency_table, tmp_path, other):  # noqa: F811
    """Rank 1 with another val data_root: every rank's inputs are gathered and compared at start, and the search is
    refused (no score, torchrun fails: no rank searches on, none waits) naming rank 1 and the input that differs."""
    from .fixtures.datasets import make_cityscapes
    p = pipeline
    mine = uncompressed_copy(p['data'], tmp_path / 'mine', invert=False)
    if other == '24 images':
        theirs, field = make_cityscapes(tmp_path / 'theirs', splits={'val': 24}, size=(64, 128), seed=1), 'val_files'
    else:
        theirs, field = uncompressed_copy(p['data'], tmp_path / 'theirs', invert=True), 'val_content'
        assert sizes(theirs) == sizes(mine), 'the same file names and sizes: only the bytes differ'
    wrapper = tmp_path / 'rank_data.py'
    wrapper.write_text(RANK_WRAPPER)
    work = tmp_path / 'work'
    args = [str(a) for a in dist_args(p, work, latency_table)]
    args[-1] = f'val_dataloader.dataset.data_root={mine}'
    cmd = torchrun_cmd(REPO / 'tools' / 'search.py', f'data_root={mine}', f'data_root={theirs}', *args)
    cmd[cmd.index(str(REPO / 'tools' / 'search.py'))] = str(wrapper)
    proc = subprocess.run(cmd, cwd=REPO, env=torchrun_env(), capture_output=True, text=True, timeout=HANG_GUARD_S)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert f"rank 1's {field} (" in out and 'do not have the same inputs' in out, out[-6000:]
    assert PROGRESS not in out and not (work / 'search_state.json').exists(), 'nothing was scored'


def _lock_holder(path: Path, proc: subprocess.Popen) -> int:
    """The pid written in the lock file ``path``, once the search ``proc`` has written it."""
    deadline = time.time() + HANG_GUARD_S
    while time.time() < deadline:
        text = path.read_text().strip() if path.is_file() else ''
        if text.isdigit():
            return int(text)
        assert proc.poll() is None, 'the search ended before its lock was seen'
        time.sleep(0.02)
    raise AssertionError(f'no lock at {path}')


def test_a_second_search_on_a_work_dir_in_use_is_refused_naming_the_holder(pipeline, latency_table,  # noqa: F811
                                                                           tmp_path):
    p = pipeline
    work = tmp_path / 'work'
    args = dist_args(p, work, latency_table)
    first = subprocess.Popen([sys.executable, str(REPO / 'tools' / 'search.py'), *map(str, args)], cwd=REPO,
                             env=torchrun_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert _lock_holder(work / 'search.lock', first) == first.pid
        os.kill(first.pid, signal.SIGSTOP)  # it holds the work dir, whatever the machine's load
        second = subprocess.run([sys.executable, str(REPO / 'tools' / 'search.py'), *map(str, args)], cwd=REPO,
                                env=torchrun_env(), capture_output=True, text=True, timeout=HANG_GUARD_S)
        os.kill(first.pid, signal.SIGCONT)
        out = second.stdout + second.stderr
        assert second.returncode != 0, out[-4000:]
        assert f'is in use: tools/search.py (pid {first.pid}) holds {work / "search.lock"}' in out, out[-4000:]
        assert PROGRESS not in out, 'the second search scored nothing'
        log, _ = first.communicate(timeout=HANG_GUARD_S)
        assert first.returncode == 0, log[-4000:]
    finally:
        if first.poll() is None:
            os.kill(first.pid, signal.SIGCONT)
            first.kill()
            first.wait()
    assert (work / 'search.json').is_file() and not (work / 'search.lock').exists(), 'the lock goes with its run'


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (gone, or a zombie no one has reaped yet)."""
    try:
        state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ('Z', 'X')


def test_a_sigkill_of_torchrun_leaves_no_rank_running(pipeline, latency_table, tmp_path):  # noqa: F811
    """The ranks run in sessions of their own (torchrun starts them so): a SIGKILL of torchrun alone used to leave
    them searching. Both ranks are stopped (SIGSTOP) once they score, so that none can finish meanwhile; a rank that
    did not die with torchrun would stay stopped for ever."""
    p = pipeline
    work = tmp_path / 'work'
    launcher = subprocess.Popen(torchrun_cmd(*dist_args(p, work, latency_table)), cwd=REPO, env=torchrun_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = []
    try:
        workers = [worker_pid(launcher, rank) for rank in (0, 1)]
        state_file, deadline = work / 'search_state.json', time.time() + HANG_GUARD_S
        while time.time() < deadline and launcher.poll() is None:
            if state_file.is_file() and json.loads(state_file.read_text())['stages']['1']['scores']:
                break
            time.sleep(0.05)
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        assert launcher.poll() is None, 'torchrun still runs when it is killed'
        launcher.kill()
        launcher.wait()
        deadline = time.time() + HANG_GUARD_S
        while time.time() < deadline and not all(_gone(pid) for pid in workers):
            time.sleep(0.1)
        assert all(_gone(pid) for pid in workers), 'a rank outlived torchrun'
        assert not (work / 'search.json').exists()
    finally:
        for pid in workers:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
