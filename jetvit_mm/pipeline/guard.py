"""The process a workflow stage's command runs under (:func:`jetvit_mm.pipeline.engine.run_guarded`): it starts the
command and ends it, with every process the command started, when the workflow's process is gone (whatever ended
it, ``kill -9`` included), when it is told to stop (SIGTERM, SIGINT, SIGHUP), and when the command exits (what it
left running). It holds the workflow's lock (an inherited descriptor) until the last of them is dead, so no second
run starts beside a live stage.

Every process the command starts is found through the parent links of ``/proc`` (Linux), this process being their
subreaper: a worker whose parent died (torchrun's workers run in sessions of their own) is re-parented here, not to
init, and is found too. Run by path with the standard library only: ``python -I guard.py PARENT_PID -- CMD...``.
"""
import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
POLL_S = 0.1


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process (Linux); whether it worked."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> List[int]:
    """The live processes below ``root`` (zombies excluded: they are dead), from ``/proc/<pid>/stat``."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat') as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        state, ppid = stat[stat.rindex(')') + 2:].split()[:2]
        if state not in 'ZX':
            children.setdefault(int(ppid), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def reap(child: int) -> Optional[int]:
    """Collect every finished child (orphans re-parented here included); the wait status of ``child`` if it
    finished."""
    status = None
    while True:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == child:
            status = wait_status


def kill_tree(child: int) -> Optional[int]:
    """SIGKILL every process below this one until none is left; the wait status of ``child`` if it was reaped."""
    status = None
    while True:
        found = reap(child)
        status = found if found is not None else status
        pids = descendants(os.getpid())
        if not pids:
            return status
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def _exit_as(wait_status: Optional[int]) -> None:
    """Leave with the command's exit status (a command killed by a signal: this process ends by the same one)."""
    code = os.waitstatus_to_exitcode(wait_status) if wait_status is not None else 1
    if code < 0:
        try:
            signal.signal(-code, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL, SIGSTOP: no handler to reset
            pass
        os.kill(os.getpid(), -code)
        code = 128 - code  # a signal whose default is not to end the process: the shell's convention
    sys.exit(code)


def guard(parent: int, command: Sequence[str]) -> None:
    """Run ``command`` until it exits, ``parent`` is gone or this process is told to stop; then end what is left."""
    become_subreaper()
    stop: List[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: stop.append(signum))
    child = subprocess.Popen(list(command)).pid
    status = None
    while status is None and not stop and os.getppid() == parent:
        status = reap(child)
        if status is None:
            time.sleep(POLL_S)
    found = kill_tree(child)
    if status is None:  # stopped or orphaned: the stage was ended here
        print(f'[stage guard] {"signal " + str(stop[0]) if stop else f"the workflow (pid {parent}) is gone"}: '
              f'ended the stage\'s processes', file=sys.stderr, flush=True)
        _exit_as(found if found is not None else signal.SIGKILL)  # a signal's number is its wait status
    _exit_as(status)


if __name__ == '__main__':
    if len(sys.argv) < 4 or sys.argv[2] != '--':
        raise SystemExit('usage: python -I guard.py PARENT_PID -- COMMAND...')
    guard(int(sys.argv[1]), sys.argv[3:])
