"""How a tool's processes share a work dir and end: one writer at a time (:func:`work_dir_lock`), and ranks that die
with the launcher that started them (:func:`die_with_parent`), so that no second run writes beside a live one."""
import contextlib
import ctypes
import errno
import fcntl
import os
import signal
import sys
from pathlib import Path
from typing import Iterator, Union

__all__ = ['WorkDirBusy', 'die_with_parent', 'work_dir_lock']

PR_SET_PDEATHSIG = 1  # linux/prctl.h


class WorkDirBusy(RuntimeError):
    """Another live process holds the work dir's lock."""


def die_with_parent(parent: int) -> bool:
    """Linux: have the kernel SIGKILL this process when its parent (``parent``: ``os.getppid()`` read at start) ends,
    whatever ends it (a SIGKILL of torchrun included, which otherwise leaves its ranks running: they run in sessions
    of their own). When the parent has already gone, this process ends at once. Returns whether it is set (False on
    another system)."""
    if not sys.platform.startswith('linux'):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f'prctl(PR_SET_PDEATHSIG) failed: {os.strerror(code)}')
    if os.getppid() != parent:  # the parent ended before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def _holder(path: Path) -> str:
    try:
        text = path.read_text(encoding='utf-8').strip()
    except OSError:
        text = ''
    return f'pid {text}' if text.isdigit() else 'a process whose pid is not written yet'


def _locked(path: Path, tool: str) -> int:
    """An open descriptor of ``path`` holding its POSIX lock (``lockf``: released by the kernel when the process
    ends, however it ends; not inherited by forked children such as data loader workers)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            raise WorkDirBusy(f'{path.parent} is in use: {tool} ({_holder(path)}) holds {path} and writes there; '
                              f'wait for it to end (or end it), or pass another --work-dir') from None
        try:  # the holder may have removed the file (and let go) between our open and lock: lock the new one
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    text = os.pread(fd, 64, 0).decode('utf-8', 'replace').strip()
    if text and not text.isdigit():  # not a lock this module wrote: never overwritten
        os.close(fd)
        raise FileExistsError(f'{path} exists and is not a lock file of {tool} (it holds {text[:20]!r}): move it '
                              f'away, or pass another --work-dir')
    return fd


@contextlib.contextmanager
def work_dir_lock(work_dir: Union[str, Path], tool: str, name: str = 'search.lock') -> Iterator[Path]:
    """Hold ``work_dir/name`` (holding this process's pid) for the block: a second holder is refused with
    :class:`WorkDirBusy`, naming the holder's pid. The file goes when the block ends; after a kill it stays behind,
    unlocked, and the next run takes it."""
    path = Path(work_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _locked(path, tool)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f'{os.getpid()}\n'.encode())
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # while still locked: no one takes the old file after this
        os.close(fd)
