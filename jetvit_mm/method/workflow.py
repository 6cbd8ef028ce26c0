"""The one resumable workflow engine of the method's stages (:mod:`jetvit_mm.method.stages`, run by
``tools/pipeline.py`` and the demo); what it fingerprints, keeps and deletes, and what a kill does: docs/pipeline.md.

A stage is a named command (one of our tools run as a user runs it, or a Python step), its own output folder, and a
fingerprint of its inputs (the command, the configs it names with their bases merged, size and mtime of the other
files it names, the fingerprints of the stages it depends on, and of the data folders it reads). It is skipped when
its folder's marker has the same fingerprint and the outputs the marker recorded (``Stage.products``) are there
unchanged; the marker is written atomically only after the stage succeeded, so a killed run starts again at the
stage it was killed in (with ``resume_flag`` when the folder holds ``resume_file``). A folder holding files the
workflow did not write is refused (``overwrite`` replaces it); previous complete outputs wait in
``.<name>.previous`` until the new ones are complete. A stage's command runs under :mod:`jetvit_mm.method.stage_guard`.

Arguments that only exist once an earlier stage ran are :class:`FileText` (a file's stripped text, e.g. the arch a
search picked) and :class:`Join` (pieces glued into one argument); ``--plan`` prints them as ``$(cat FILE)``.
With ``jobs`` > 1 the stages whose inputs are done run side by side, the earlier in the list first.
"""
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from jetvit_mm.jsonio import write_json_atomic
from jetvit_mm.models.checkpoint.integrity import file_digest as sha256_file_digest

MARKER = '.stage.json'  # written when a stage succeeded
STARTED = '.stage_started.json'  # written when it starts: a later run with the same fingerprint resumes it
GUARD = Path(__file__).with_name('stage_guard.py')  # the process a stage's command runs under

CONFIG_LOCK = threading.Lock()


@dataclass(frozen=True)
class FileText:
    """An argument read when its stage starts: the stripped text of ``path`` (written by an earlier stage)."""
    path: Path

    def value(self) -> str:
        if not Path(self.path).is_file():
            raise FileNotFoundError(f'{self.path}: not written (the stage that writes it has not run or failed)')
        return Path(self.path).read_text().strip()

    def shell(self) -> str:
        return f'$(cat {shlex.quote(str(self.path))})'


@dataclass(frozen=True)
class Join:
    """One argument made of pieces (text, paths, :class:`FileText`), e.g. ``finetune_$(cat best_arch.txt).py``."""
    parts: Tuple[object, ...]

    def __init__(self, *parts: object) -> None:
        object.__setattr__(self, 'parts', parts)

    def value(self) -> str:
        return ''.join(resolve(p) for p in self.parts)

    def shell(self) -> str:
        text = ''.join(p.shell() if isinstance(p, (FileText, Join)) else str(p) for p in self.parts)
        return text if all(c not in text for c in ' \'"') else f'"{text}"'


Arg = Union[str, int, float, Path, FileText, Join]


def resolve(arg: Arg) -> str:
    """The argument as the command receives it."""
    return arg.value() if isinstance(arg, (FileText, Join)) else str(arg)


def shell_word(arg: Arg) -> str:
    """The argument as a shell command line writes it (upstream outputs as ``$(cat FILE)``)."""
    return arg.shell() if isinstance(arg, (FileText, Join)) else shlex.quote(str(arg))


@dataclass
class Stage:
    """One step of a workflow. ``command``: the argv (``sys.executable tools/X.py ...``); or ``action``: a Python
    step (called with the stage) whose inputs are ``command`` (values only, not run) and ``inputs``. ``deps``: the
    stages whose outputs it reads. ``copy_in``: (file, name) copied into the folder before a fresh start when the
    file exists (a cache, not fingerprinted). ``iterations``: for ``--plan``'s estimate. ``products``: glob patterns
    (in the stage's folder) of the outputs a later stage or the user reads, recorded with their digest at completion
    and checked before the stage is skipped; ``pointers``: products whose text names another file that is one too
    (mmengine's ``last_checkpoint``). ``data``: folders the stage reads whose every file is an input (path, size,
    mtime)."""
    name: str
    out_dir: Path
    command: Sequence[Arg] = ()
    deps: Sequence[str] = ()
    inputs: Sequence[Path] = ()
    resume_flag: Optional[str] = None
    resume_file: Optional[str] = None
    copy_in: Sequence[Tuple[Path, str]] = ()
    action: Optional[Callable[['Stage'], None]] = None
    iterations: Optional[int] = None
    timing_key: str = ''  # stages with the same key (the config whose iterations they run) share a step time
    note: str = ''
    env: Dict[str, str] = field(default_factory=dict)
    products: Sequence[str] = ()
    pointers: Sequence[str] = ()
    data: Sequence[Path] = ()

    def argv(self, resume: bool = False) -> List[str]:
        args = [resolve(a) for a in self.command]
        return args + [self.resume_flag] if resume and self.resume_flag else args

    def shell(self) -> str:
        lines = [f'mkdir -p {shlex.quote(str(self.out_dir))}']
        for src, name in self.copy_in:
            lines.append(f'cp {shlex.quote(str(src))} {shlex.quote(str(Path(self.out_dir) / name))}')
        if self.action is not None:
            lines.append(self.note or f'# python step: {self.name}')
        else:
            env = ' '.join(f'{k}={shlex.quote(v)}' for k, v in self.env.items())
            lines.append((env + ' ' if env else '') + ' '.join(shell_word(a) for a in self.command))
        return '\n'.join(lines)


def _config_text(path: Path) -> str:
    """A config with its ``_base_`` files merged (mmengine's reader), or its text when it has no bases or does not
    parse (a script: never executed here)."""
    text = path.read_text(errors='replace')
    if not re.search(r'^_base_\s*=', text, re.MULTILINE):  # a script that names _base_ is no config
        return text
    try:
        with CONFIG_LOCK, warnings.catch_warnings():  # mmengine's reader is not thread-safe (the demo's threads)
            warnings.simplefilter('ignore')
            from jetvit_mm.mm.engine.launch import read_config

            return json.dumps(read_config(str(path)).to_dict(), sort_keys=True, default=str)
    except Exception:  # not an mmengine config (or one that fails to parse: the tool will say why)
        return text


def file_fingerprint(path: Path) -> Optional[List]:
    """What identifies an input file: a config's merged text digest, size and mtime of anything else; None when
    ``path`` is no file."""
    try:
        if not path.is_file():
            return None
    except OSError:  # a name too long to be a path
        return None
    if path.suffix == '.py':
        return ['text', hashlib.sha256(_config_text(path).encode()).hexdigest()[:16]]
    st = path.stat()
    return ['stat', st.st_size, st.st_mtime_ns]


def _named_files(values: Iterable[str], own_dir: Path) -> Dict[str, List]:
    """The files an argument list names, alone or as the value of ``key=value``, but for the stage's own outputs
    (under ``own_dir``)."""
    found, own = {}, Path(own_dir).resolve()
    for value in values:
        for candidate in (value, value.split('=', 1)[-1]):
            fp = file_fingerprint(Path(candidate)) if candidate and len(candidate) < 4096 else None
            if fp is not None and own not in Path(candidate).resolve().parents:
                found[candidate] = fp
    return found


def _own(name: str) -> bool:
    """The workflow's own bookkeeping files in a stage folder (markers and their temporary files)."""
    return any(name == m or name.startswith(m + '.tmp') for m in (MARKER, STARTED))


def folder_files(folder: Path) -> List[str]:
    """Every file under ``folder`` (relative, sorted), but the workflow's own markers; symlinks as files."""
    found = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        for name in files + [d for d in dirs if (Path(root) / d).is_symlink()]:
            if not (rel == Path('.') and _own(name)):
                found.append((rel / name).as_posix())
    return sorted(found)


def sha256_of(path: Path) -> str:
    return sha256_file_digest(path).split(':', 1)[1]


def file_digest(path: Path) -> List:
    """``[size, mtime_ns, sha256]`` of a product, as its marker records it."""
    st = Path(path).stat()
    return [st.st_size, st.st_mtime_ns, sha256_of(path)]


def tree_fingerprint(root: Path, skip: Sequence[Path] = ()) -> str:
    """What identifies a data folder: every file under it (symlinks followed; not under ``skip``, e.g. a work dir
    inside it), by relative path, size and mtime (``os.stat``), hashed; cheap (no file is read). Not seen: a file
    rewritten with the same size whose mtime is set back."""
    h, count, seen = hashlib.sha256(), 0, set()
    skipped = {Path(p).resolve() for p in skip}
    for top, dirs, files in os.walk(root, followlinks=True):
        st = os.stat(top)
        if (st.st_dev, st.st_ino) in seen or Path(top).resolve() in skipped:  # a symlink loop, a skipped folder
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()
        for name in sorted(files):
            path = Path(top) / name
            try:
                st = path.stat()
            except OSError:  # a dangling link
                continue
            h.update(f'{path.relative_to(root).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n'.encode())
            count += 1
    return f'{count} files, sha256:{h.hexdigest()[:20]}'


def _pointed(pointer: Path) -> Optional[Path]:
    """The file a pointer file's text names (absolute, or relative to the pointer's folder); None if unreadable."""
    try:
        text = pointer.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return (pointer.parent / text) if text else None


def _product_key(path: Path, folder: Path) -> str:
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return path.relative_to(folder).as_posix() if folder in path.parents else str(path)


def record_products(stage: Stage) -> Dict[str, List]:
    """The digest of each product of a finished stage (the files ``products`` match, and those ``pointers`` name)."""
    out, found = Path(stage.out_dir), {}
    for pattern in stage.products:
        for path in sorted(out.glob(pattern)):
            if path.is_file():
                found[_product_key(path, out)] = file_digest(path)
    for name in stage.pointers:
        target = _pointed(out / name)
        if target is not None and target.is_file():
            found[_product_key(target, out)] = file_digest(target)
    return found


def product_problems(folder: Path, marker: dict) -> Dict[str, str]:
    """What differs from the products a marker recorded, by product: missing, another size, other content (hashed
    only when the mtime changed). A marker written before products were recorded cannot be checked."""
    if 'products' not in marker:
        return {MARKER: 'records no outputs (written by an older version)'}
    problems = {}
    for name, (size, mtime_ns, digest) in marker['products'].items():
        path = Path(folder) / name
        try:
            st = path.stat()
        except OSError:
            problems[name] = 'is missing'
            continue
        if st.st_size != size:
            problems[name] = f'changed ({st.st_size} bytes, {size} when the stage finished)'
        elif st.st_mtime_ns != mtime_ns and sha256_of(path) != digest:
            problems[name] = 'changed (another content than when the stage finished)'
    return problems


def _read(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def foreign_files(folder: Path) -> List[str]:
    """The files of a stage folder the workflow did not write: all of them with no marker; those outside the
    manifest of outputs a marker recorded (a marker of an older version: those newer than it). A folder of a run
    that did not finish (a start marker, no marker) is the stage's own."""
    folder = Path(folder)
    if not folder.exists() and not folder.is_symlink():
        return []
    if not folder.is_dir():
        return [folder.name]
    files = folder_files(folder)
    marker = _read(folder / MARKER)
    if 'outputs' in marker:
        known = set(marker['outputs'])
        return [f for f in files if f not in known]
    if marker:
        return [f for f in files if (folder / f).lstat().st_mtime > float(marker.get('finished', 0))]
    return [] if (folder / STARTED).is_file() else files


def previous_dir(stage: Stage) -> Path:
    """Where a stage's previous complete outputs wait while it runs again."""
    return Path(stage.out_dir).with_name(f'.{Path(stage.out_dir).name}.previous')


def run_guarded(argv: Sequence[str], cwd: Optional[Path], env: Dict[str, str], log, keep_fd: Optional[int] = None,
                guards: Optional[set] = None) -> int:
    """``argv`` under a guard process (:mod:`jetvit_mm.method.stage_guard`), its output to the open file ``log``; its
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
        files = _named_files(values, stage.out_dir)
        files.update({str(p): file_fingerprint(Path(p)) for p in stage.inputs})
        key = dict(command=values, files=files, deps={d: self.fingerprints[d] for d in stage.deps},
                   env=stage.env)
        if stage.data:
            key['data'] = {str(p): self.data_fingerprint(p) for p in stage.data}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]

    @staticmethod
    def can_resume(stage: Stage, problems: Dict[str, str]) -> bool:
        """Whether the folder holds what ``resume_flag`` continues from: ``resume_file`` and the files its pointers
        name, none of them among ``problems``."""
        out = Path(stage.out_dir)
        if not stage.resume_file or not (out / stage.resume_file).is_file() or stage.resume_file in problems:
            return False
        targets = [_pointed(out / name) for name in stage.pointers]
        return all(t is not None and t.is_file() and _product_key(t, out) not in problems for t in targets)

    def assess(self, stage: Stage, fingerprint: str) -> Tuple[str, str]:
        """(``done``, ``resume`` or ``run``; why, in a few words, when it is not ``done``)."""
        out = Path(stage.out_dir)
        marker = _read(out / MARKER)
        if marker.get('fingerprint') == fingerprint:
            problems = product_problems(out, marker)
            if not problems:
                return 'done', ''
            why = '; '.join(f'{k} {v}' for k, v in list(problems.items())[:3])
            return ('resume' if self.can_resume(stage, problems) else 'run'), f'its outputs are not as recorded: {why}'
        if _read(out / STARTED).get('fingerprint') == fingerprint and self.can_resume(stage, {}):
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
        """Hold the work dir for this run: a second run in the same folder at the same time is refused (it would
        write the stages the first one is writing). The stages' guards inherit the lock: it is held until the last
        process of a stage is gone, even when this process was killed."""
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


def python_tool(repo: Path, script: str, *args: Arg) -> List[Arg]:
    """The argv of ``python tools/<script> args`` with this interpreter."""
    return [sys.executable, str(Path(repo) / 'tools' / script), *args]
