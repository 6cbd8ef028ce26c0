"""The one resumable workflow engine of the method's stages (:mod:`jetvit_mm.pipeline.stages`, run by
``tools/pipeline.py`` and the demo); what it fingerprints, keeps and deletes, and what a kill does: docs/pipeline.md.

A stage is a named command (one of our tools run as a user runs it, or a Python step), its own output folder, and a
fingerprint of its inputs; it is skipped when its folder's marker has the same fingerprint and its recorded outputs
are there unchanged.
"""
import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from jetvit_mm.fingerprints import text_digest, tree_fingerprint
from jetvit_mm.jsonio import write_json_atomic

from .inputs import file_fingerprint, named_files
from .products import (
    MARKER,
    STARTED,
    folder_files,
    foreign_files,
    pointed,
    previous_dir,
    product_key,
    product_problems,
    read_marker,
    record_products,
)
from .stage import Stage, resolve

GUARD = Path(__file__).with_name('guard.py')  # the process a stage's command runs under


def run_guarded(argv: Sequence[str], cwd: Optional[Path], env: Dict[str, str], log, keep_fd: Optional[int] = None,
                guards: Optional[set] = None) -> int:
    """``argv`` under a guard process (:mod:`jetvit_mm.pipeline.guard`), its output to the open file ``log``; its
    exit status. The guard, in a session of its own, ends the command and every process it started when this process
    ends (any signal, ``kill -9`` included), and holds ``keep_fd`` (the work dir's lock) until they are all gone;
    an exception here (Ctrl-C) stops it and waits for it. ``guards``: the running guards, this one among them."""
    proc = subprocess.Popen([sys.executable, '-I', str(GUARD), str(os.getpid()), '--', *argv], cwd=cwd, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            pass_fds=() if keep_fd is None else (keep_fd, ))
    guards = set() if guards is None else guards
    guards.add(proc)
    try:
        return proc.wait()
    except BaseException:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        raise
    finally:
        guards.discard(proc)


class Workflow:
    """Runs stages in their folders under ``work_dir``, skipping those done with the same inputs and outputs.
    ``overwrite``: replace a stage folder that holds files the workflow did not write (refused otherwise)."""

    def __init__(self, work_dir: Path, cwd: Optional[Path] = None, env: Optional[Dict[str, str]] = None,
                 log: Callable[[str], None] = print, overwrite: bool = False) -> None:
        self.work_dir, self.cwd, self.log, self.overwrite = Path(work_dir), cwd, log, overwrite
        self.env = dict(os.environ if env is None else env)
        self.fingerprints: Dict[str, str] = {}  # of the stages seen in this run, by name
        self.timings: Dict[str, float] = {}
        self.data_fingerprints: Dict[str, str] = {}  # of the data folders, once per run
        self.lock_fd: Optional[int] = None  # the work dir's lock while held: inherited by the stages' guards
        self.guards: set = set()  # the guard processes of the running stages

    def data_fingerprint(self, root: Path) -> str:
        """:func:`tree_fingerprint` of a data folder, computed once per run."""
        key = str(Path(root).resolve())
        if key not in self.data_fingerprints:
            if not Path(key).is_dir():
                raise FileNotFoundError(f'data folder {key} does not exist')
            self.data_fingerprints[key] = tree_fingerprint(Path(key), skip=[self.work_dir])
        return self.data_fingerprints[key]

    def fingerprint(self, stage: Stage) -> str:
        """The digest of everything the stage's result depends on (upstream stages must have been seen first)."""
        missing = [d for d in stage.deps if d not in self.fingerprints]
        if missing:
            raise RuntimeError(f'stage {stage.name}: its inputs {missing} have not run in this workflow')
        values = [resolve(a) for a in stage.command]
        files = named_files(values, stage.out_dir)
        files.update({str(p): file_fingerprint(Path(p)) for p in stage.inputs})
        key = dict(command=values, files=files, deps={d: self.fingerprints[d] for d in stage.deps},
                   env=stage.env)
        if stage.data:
            key['data'] = {str(p): self.data_fingerprint(p) for p in stage.data}
        return text_digest(json.dumps(key, sort_keys=True))[:20]

    @staticmethod
    def can_resume(stage: Stage, problems: Dict[str, str]) -> bool:
        """Whether the folder holds what ``resume_flag`` continues from: ``resume_file`` and the files its pointers
        name, none of them among ``problems``."""
        out = Path(stage.out_dir)
        if not stage.resume_file or not (out / stage.resume_file).is_file() or stage.resume_file in problems:
            return False
        targets = [pointed(out / name) for name in stage.pointers]
        return all(t is not None and t.is_file() and product_key(t, out) not in problems for t in targets)

    def assess(self, stage: Stage, fingerprint: str) -> Tuple[str, str]:
        """(``done``, ``resume`` or ``run``; why, in a few words, when it is not ``done``)."""
        out = Path(stage.out_dir)
        marker = read_marker(out / MARKER)
        if marker.get('fingerprint') == fingerprint:
            problems = product_problems(out, marker)
            if not problems:
                return 'done', ''
            why = '; '.join(f'{k} {v}' for k, v in list(problems.items())[:3])
            return ('resume' if self.can_resume(stage, problems) else 'run'), f'its outputs are not as recorded: {why}'
        if read_marker(out / STARTED).get('fingerprint') == fingerprint and self.can_resume(stage, {}):
            return 'resume', 'killed midway'
        if marker:
            return 'run', 'its inputs changed'
        return 'run', 'an unfinished run with other inputs' if (out / STARTED).is_file() else ''

    @staticmethod
    def refusal(stage: Stage, foreign: Sequence[str]) -> str:
        """Why a stage's folder is not rewritten: the files in it the workflow did not write."""
        shown = ', '.join(foreign[:8]) + (f' and {len(foreign) - 8} more' if len(foreign) > 8 else '')
        return (f'stage {stage.name} would rewrite {stage.out_dir}, which holds files this workflow did not write '
                f'({shown}): move them elsewhere, or pass --overwrite to let it replace them')

    def _make_room(self, stage: Stage) -> None:
        """An empty folder for a fresh run: a complete earlier run waits in :func:`previous_dir` until this one is
        complete; an unfinished one (the workflow's own) goes. Files the workflow did not write are refused."""
        out, previous = Path(stage.out_dir), previous_dir(stage)
        if out.exists() or out.is_symlink():
            foreign = foreign_files(out)
            if foreign and not self.overwrite:
                raise RuntimeError(self.refusal(stage, foreign))
            if (out / MARKER).is_file() or foreign:
                if previous.exists():
                    shutil.rmtree(previous)  # older than the complete run now set aside
                os.replace(out, previous)
                self.log(f'{stage.name}: its previous outputs are kept in {previous} until this run completes')
            else:
                shutil.rmtree(out)
        out.mkdir(parents=True)
        for src, name in stage.copy_in:
            if Path(src).is_file():
                shutil.copy(src, out / name)

    def run(self, stage: Stage, execute: Optional[Callable[[Stage, List[str]], None]] = None) -> bool:
        """Run ``stage`` unless it is done; returns whether it ran. ``execute(stage, argv)`` runs the command
        (default: :meth:`execute`, its output in ``<out_dir>/stage.log``) and raises when it fails."""
        fingerprint = self.fingerprint(stage)
        out = Path(stage.out_dir)
        state, why = self.assess(stage, fingerprint)
        if state == 'done':
            self.fingerprints[stage.name] = fingerprint
            self.log(f'{stage.name}: done, skipped ({out})')
            return False
        if state == 'run':
            self._make_room(stage)
        else:  # resumed in place: what it writes joins the folder's manifest, so no file of another may be there
            foreign = foreign_files(out)
            if foreign and not self.overwrite:
                raise RuntimeError(self.refusal(stage, foreign))
            (out / MARKER).unlink(missing_ok=True)
        write_json_atomic(out / STARTED, dict(fingerprint=fingerprint, started=time.time(), pid=os.getpid()))
        doing = 'resuming' if state == 'resume' else 'running'
        self.log(f'{stage.name}: {doing} ({out})' + (f': {why}' if why else ''))
        began = time.time()
        if stage.action is not None:
            stage.action(stage)
        else:
            (execute or self.execute)(stage, stage.argv(resume=state == 'resume'))
        self.timings[stage.name] = time.time() - began
        self._finish(stage, fingerprint)
        return True

    def _finish(self, stage: Stage, fingerprint: str) -> None:
        """The marker (with the manifest of the folder and the products' digests); the previous outputs go."""
        out = Path(stage.out_dir)
        write_json_atomic(out / MARKER, dict(fingerprint=fingerprint, command=stage.argv(),
                                             seconds=round(self.timings[stage.name], 1), finished=time.time(),
                                             outputs=folder_files(out), products=record_products(stage)))
        self.fingerprints[stage.name] = fingerprint
        if previous_dir(stage).exists():
            shutil.rmtree(previous_dir(stage))

    def execute(self, stage: Stage, argv: List[str]) -> None:
        """The command under a guard process (:func:`run_guarded`), its output appended to ``<out_dir>/stage.log``."""
        log = Path(stage.out_dir) / 'stage.log'
        with open(log, 'a') as f:
            f.write('$ ' + ' '.join(shlex.quote(a) for a in argv) + '\n')
            f.flush()
            returncode = run_guarded(argv, self.cwd, {**self.env, **stage.env}, f, self.lock_fd, self.guards)
        if returncode != 0:
            tail = ''.join(log.read_text(errors='replace').splitlines(keepends=True)[-30:])
            raise RuntimeError(f'stage {stage.name} failed (exit {returncode}); log {log}:\n{tail}')

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the work dir for this run (a second run there at the same time is refused); the stages' guards
        inherit the lock, so it is held until the last process of a stage is gone, even when this one was killed."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        path = self.work_dir / '.workflow.lock'
        with open(path, 'a+') as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.seek(0)
                raise RuntimeError(f'{self.work_dir} is in use by another run (pid {f.read().strip() or "?"}, or a '
                                   f'stage it started that is still ending): wait for it to end, or choose another '
                                   f'work dir') from None
            f.seek(0)
            f.truncate()
            f.write(str(os.getpid()))
            f.flush()
            self.lock_fd = f.fileno()
            try:
                yield
            finally:
                self.lock_fd = None  # closing the file lets the lock go once no guard holds it either

    def check_folders(self, stages: Sequence[Stage]) -> None:
        """Before any stage runs: refuse the folders of the stages that would run and hold files the workflow did
        not write (all of them, named)."""
        refused = [self.refusal(stage, foreign) for stage, state in zip(stages, self.preview(stages))
                   if state != 'done' and (foreign := foreign_files(stage.out_dir))]
        self.fingerprints.clear()
        if refused and not self.overwrite:
            raise RuntimeError('\n'.join(refused))

    def run_all(self, stages: Sequence[Stage], until: Optional[str] = None, jobs: int = 1) -> None:
        """The stages in order, stopping after ``until``; the folders are checked first (:meth:`check_folders`).
        ``jobs`` > 1: at most that many at a time, each once the stages it depends on are done, a waiting stage
        earlier in the list first; after a failure no stage starts, the running ones end and the failure is raised."""
        names = [s.name for s in stages]
        stages = stages[:names.index(until) + 1] if until in names else stages
        self.check_folders(stages)
        if jobs == 1:
            for stage in stages:
                self.run(stage)
            return
        todo, running, done, failure = list(stages), {}, set(), None
        with ThreadPoolExecutor(jobs) as pool:
            try:
                while running or (todo and failure is None):
                    ready = [s for s in todo if set(s.deps) <= done] if failure is None else []
                    for stage in ready[:jobs - len(running)]:
                        todo.remove(stage)
                        running[pool.submit(self.run, stage)] = stage.name
                    if not running:
                        raise RuntimeError(f'stages {[s.name for s in todo]} wait for stages not in the workflow')
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        name = running.pop(future)
                        if future.exception() is None:
                            done.add(name)
                        failure = failure or future.exception()
            except BaseException:  # Ctrl-C: the running stages end too
                for guard in list(self.guards):
                    guard.send_signal(signal.SIGTERM)
                raise
        if failure is not None:
            raise failure

    def preview(self, stages: Sequence[Stage]) -> List[str]:
        """Per stage: ``done``, ``resume``, ``run`` or ``run (inputs not made yet)`` as a plan would find it,
        without running anything."""
        states, changed = [], set()
        for stage in stages:
            try:
                if changed & set(stage.deps):
                    raise FileNotFoundError
                fp = self.fingerprint(stage)
                state = self.assess(stage, fp)[0]
                self.fingerprints[stage.name] = fp
            except (FileNotFoundError, RuntimeError):
                state = 'run (inputs not made yet)'
            if state != 'done':
                changed.add(stage.name)
            states.append(state)
        return states
