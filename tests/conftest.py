import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

import pytest

from .markers import KINDS, mark_kinds, process_guard

REPO = Path(__file__).resolve().parents[1]
# How long a test waits for a process it started before calling it hung. A guard, not a time limit: the suite passes
# with another process loading both cores (the demo's test took over 600 s so), and CI's own limit is 90 minutes.
HANG_GUARD_S = 2400


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Every test is ``unit`` or ``integration`` (tests/markers.py): ``pytest -m unit`` runs the fast ones."""
    mark_kinds(items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A unit test may not start a process (tests/markers.py): its marker would be wrong."""
    if item.get_closest_marker('integration') is None:
        with process_guard(item.nodeid):
            yield
    else:
        yield


@pytest.fixture(autouse=True)
def _fast_kernels_pass_their_self_check():
    """A fast kernel that fails its self-check warns and runs the torch path for the rest of the process, so a test
    of it would compare the torch path with itself and pass. A failed self-check fails the test that met it; tests
    that force one on purpose forget the verdicts when they end."""
    yield
    selfcheck = sys.modules.get('jetvit_mm.models.mixers.kernels.selfcheck')
    failed = [key for key, ok in getattr(selfcheck, 'VERDICTS', {}).items() if not ok]
    if failed:
        selfcheck.VERDICTS.clear()  # the next test checks afresh, so only this one is failed for it
        pytest.fail(f'fast kernel(s) failed their self-check here and fell back to the torch path: '
                    f'{", ".join(f"{k} on {d} ({t})" for k, d, t in failed)} (the RuntimeWarning says why)',
                    pytrace=False)


_SECONDS = {kind: [0, 0.] for kind in KINDS}  # tests run, seconds (setup + call + teardown) per kind


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for kind in KINDS:
        if kind in report.keywords:
            _SECONDS[kind][0] += report.when == 'call'
            _SECONDS[kind][1] += report.duration


def pytest_terminal_summary(terminalreporter) -> None:
    """How long the unit and the integration tests took, each (the times of ``make test``'s two halves)."""
    ran = {kind: (n, s) for kind, (n, s) in _SECONDS.items() if n}
    if ran:
        terminalreporter.write_line('; '.join(f'{kind}: {n} tests, {s:.0f} s' for kind, (n, s) in ran.items()))


def run_tool(script: str, *args: str, cwd: Path = REPO, check: bool = True,
             env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    """Run ``tools/<script>`` in a fresh interpreter, as a user would; return the finished process. ``env`` adds
    variables to the inherited environment."""
    env = {**os.environ, 'PYTHONUNBUFFERED': '1', 'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS', '2'),
           **(env or {})}
    proc = subprocess.run([sys.executable, str(REPO / 'tools' / script), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    if check and proc.returncode != 0:
        raise AssertionError(f'tools/{script} failed ({proc.returncode}):\n'
                             f'{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}')
    return proc


@pytest.fixture(scope='session')
def tiny_cityscapes(tmp_path_factory) -> Path:
    from .fixtures.datasets import make_cityscapes
    return make_cityscapes(tmp_path_factory.mktemp('cityscapes'), splits={'train': 4, 'val': 2}, size=(64, 128),
                           seed=0)
