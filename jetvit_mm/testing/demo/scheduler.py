"""How the demo runs the tools: each a stage of the workflow engine (:mod:`jetvit_mm.mm.workflow`: its own folder,
skipped when done with the same inputs, resumed when killed), in its own process, at most ``jobs`` at a time, waiting
steps served by priority (the critical path first), a step waiting for the steps it depends on."""
import heapq
import itertools
import os
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from jetvit_mm.mm.workflow import Stage, Workflow, python_tool

from .paths import REPO


class Slots:
    """A counting semaphore that serves the waiting step with the lowest priority number first (then FIFO)."""

    def __init__(self, count: int) -> None:
        self.free = count
        self.cv = threading.Condition()
        self.waiting: list = []
        self.tickets = itertools.count()

    def acquire(self, priority: int) -> None:
        with self.cv:
            ticket = (priority, next(self.tickets))
            heapq.heappush(self.waiting, ticket)
            self.cv.wait(0.1)  # steps that one event released together all queue up: priority decides among them
            while not (self.free > 0 and self.waiting[0] == ticket):
                self.cv.wait()
            heapq.heappop(self.waiting)
            self.free -= 1
            self.cv.notify_all()

    def release(self) -> None:
        with self.cv:
            self.free += 1
            self.cv.notify_all()


class Pipeline:
    """Runs tools as workflow stages in subprocesses, at most ``jobs`` at a time; steps wait for the futures they
    depend on. A stage's folder is ``<log_dir>/../<name>`` unless given; ``inputs``: files every stage depends on
    (the dataset's stamp)."""

    def __init__(self, log_dir: Path, jobs: int, threads: int, start: float, quiet: bool = False,
                 inputs: Sequence[Path] = ()) -> None:
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.inputs = list(inputs)
        self.slots = Slots(jobs)
        self.pool = ThreadPoolExecutor(max_workers=64)
        self.env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
                        PYTHONUNBUFFERED='1', PYTHONWARNINGS='ignore')
        self.start, self.quiet = start, quiet
        self.failed = threading.Event()
        self.timings: Dict[str, float] = {}
        self.local = threading.local()
        self.workflow = Workflow(log_dir.parent, cwd=REPO, env=self.env, log=self.log)

    def log(self, message: str) -> None:
        if not self.quiet:
            print(f'[{time.time() - self.start:6.0f} s] {message}', flush=True)

    def tool(self, name: str, script: str, *args, priority: int = 1, out: Optional[Path] = None,
             resume: bool = False, copy_in: Sequence[Tuple[Path, str]] = ()) -> bool:
        """``python tools/<script> args`` as the stage ``name`` (skipped when done with the same inputs); its output
        goes to ``<log_dir>/<name>.log``. Waiting steps start in ``priority`` order (0 first: the critical path
        teacher -> Step 1 -> Step 2). ``resume``: a train stage (``--resume`` when killed after a checkpoint).
        Returns whether it ran."""
        if self.failed.is_set():
            raise RuntimeError(f'{name}: not started, an earlier step failed')
        stage = Stage(name, out or self.log_dir.parent / name, python_tool(REPO, script, *args), inputs=self.inputs,
                      resume_flag='--resume' if resume else None, resume_file='last_checkpoint' if resume else None,
                      copy_in=copy_in)
        return self.run_stage(stage, priority)

    def run_stage(self, stage: Stage, priority: int = 1) -> bool:
        """Run a stage of the workflow (a tool in a slot, or a Python step); returns whether it ran."""
        try:
            return self.workflow.run(stage, lambda s, argv: self._execute(s.name, argv, priority))
        except Exception:
            self.failed.set()
            raise

    def _execute(self, name: str, cmd: List[str], priority: int) -> None:
        log = self.log_dir / f'{name}.log'
        held = getattr(self.local, 'held', False)
        if not held:
            self.slots.acquire(priority)
        try:
            began = time.time()
            with open(log, 'w') as f:
                f.write('$ ' + ' '.join(cmd) + '\n')
                f.flush()
                proc = subprocess.run(cmd, cwd=REPO, env=self.env, stdout=f, stderr=subprocess.STDOUT)
            self.timings[name] = time.time() - began
        finally:
            if not held:
                self.slots.release()
        if proc.returncode != 0:
            tail = ''.join(log.read_text().splitlines(keepends=True)[-30:])
            raise RuntimeError(f'{name} failed (exit {proc.returncode}); log {log}:\n{tail}')
        self.log(f'{name}: {self.timings[name]:.0f} s')

    @contextmanager
    def hold(self, priority: int = 0):
        """Keep one slot for every tool this thread runs inside the block (a chain of steps that must not wait
        behind other steps between its links)."""
        self.slots.acquire(priority)
        self.local.held = True
        try:
            yield
        finally:
            self.local.held = False
            self.slots.release()

    def submit(self, fn: Callable, *deps: Future) -> Future:
        def run():
            for dep in deps:
                dep.result()
            return fn()
        return self.pool.submit(run)
