"""Which tests are ``unit`` and which ``integration`` (pyproject's markers).

The markers are written in the test files: ``@pytest.mark.integration`` on a test (or ``pytestmark`` on a module)
that starts a process (a tool, torchrun, a fresh interpreter) or is slow in process (a shipped full-size model);
every test left unmarked is a unit test (added at collection).

So that a marker cannot be forgotten, a unit test that starts a process fails, naming itself and the command
(:func:`process_guard`): while a unit test runs, ``subprocess.Popen`` of a Python interpreter, torchrun or a shell
(a tool, a worker, a script) and ``multiprocessing``'s process start are refused. Probes libraries run for
themselves (mmengine's ``gcc --version``, ``git rev-parse``, inductor's check that its CPU code loads) and torch's
compile workers are allowed.
"""
import contextlib
import multiprocessing.process
import os
import re
import shlex
import subprocess
from typing import Iterator, Sequence

import pytest

KINDS = ('unit', 'integration')
# what a test's process runs: a Python interpreter (a tool, a fresh interpreter), torchrun, a shell script
RUNNERS = re.compile(r'^(python[\d.]*|torchrun|bash|sh)$')
# processes a unit test may start without knowing: torch's compile workers (inductor's subprocess pool)
ALLOWED_COMMANDS = ('torch._inductor', 'torch/_inductor', 'compile_worker')


class UnmarkedProcessError(RuntimeError):
    """A test that starts a process without ``@pytest.mark.integration``."""


def kind_of(item: pytest.Item) -> str:
    """'unit' or 'integration' for a collected test: its marker, unit when it has none."""
    own = [k for k in KINDS if item.get_closest_marker(k) is not None]
    if len(own) > 1:
        raise pytest.UsageError(f'{item.nodeid} is marked both unit and integration')
    return own[0] if own else 'unit'


def mark_kinds(items: list) -> None:
    for item in items:
        kind = kind_of(item)
        if item.get_closest_marker(kind) is None:
            item.add_marker(getattr(pytest.mark, kind))


def _inductor_load_probe(words: Sequence[str]) -> bool:
    """Whether ``words`` is inductor's own probe of the CPU vector ISA: ``python -c`` with its dlopen script, which
    it runs on a cold cache (a fresh machine) at the first CPU compile."""
    if len(words) != 3 or words[1] != '-c':
        return False
    from torch._inductor.cpu_vec_isa import VecISA
    template = getattr(VecISA, '_avx_py_load', None)
    if not template or '__lib_path__' not in template:
        return False
    pattern = '[^"]*'.join(re.escape(part) for part in template.split('__lib_path__'))
    return re.fullmatch(pattern, words[2]) is not None


def _allowed(command: Sequence[str]) -> bool:
    if isinstance(command, (str, bytes)):
        words = shlex.split(os.fsdecode(command))
    else:
        words = [os.fsdecode(c) for c in command]
    if not words or not RUNNERS.match(os.path.basename(words[0])):
        return True  # a probe (gcc --version, git rev-parse), not a test's process
    return any(a in ' '.join(words) for a in ALLOWED_COMMANDS) or _inductor_load_probe(words)


@contextlib.contextmanager
def process_guard(nodeid: str) -> Iterator[None]:
    """Inside: starting a process (other than torch's compile workers) raises :class:`UnmarkedProcessError`."""
    popen_init = subprocess.Popen.__init__
    process_start = multiprocessing.process.BaseProcess.start

    def refuse(what: str) -> None:
        raise UnmarkedProcessError(f'{nodeid} starts a process ({what}) but is not marked integration: add '
                                   f'@pytest.mark.integration (tests/markers.py)')

    def guarded_popen(self, args, *rest, **kwargs):
        if not _allowed(args):
            refuse(str(args)[:200])
        return popen_init(self, args, *rest, **kwargs)

    def guarded_start(self):
        refuse(f'multiprocessing {type(self).__name__} {self.name}')

    subprocess.Popen.__init__ = guarded_popen
    multiprocessing.process.BaseProcess.start = guarded_start
    try:
        yield
    finally:
        subprocess.Popen.__init__ = popen_init
        multiprocessing.process.BaseProcess.start = process_start
