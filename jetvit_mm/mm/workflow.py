"""The one resumable workflow engine of ``tools/pipeline.py`` and the demo: a stage is a named command (one of our
tools run as a user runs it, or a Python step), its own output folder, and a fingerprint of its inputs (the command,
the text of the configs it names with their bases merged, size and mtime of the other files it names, the
fingerprints of the stages it depends on).

A stage is skipped when its folder holds a marker with the same fingerprint; it (and so everything after it, whose
fingerprints include its own) reruns when an input changed. The marker is written atomically only after the stage
succeeded, so a killed run starts again at the stage it was killed in: from scratch, or with ``resume_flag`` when the
stage's folder holds ``resume_file`` (``tools/train.py --resume`` when mmengine wrote ``last_checkpoint``).

Arguments that only exist once an earlier stage ran are :class:`FileText` (a file's stripped text, e.g. the arch a
search picked) and :class:`Join` (pieces glued into one argument); ``--plan`` prints them as ``$(cat FILE)``.
"""
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

MARKER = '.stage.json'  # written when a stage succeeded
STARTED = '.stage_started.json'  # written when it starts: a later run with the same fingerprint resumes it

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
    file exists (a cache, not fingerprinted). ``iterations``: for ``--plan``'s estimate."""
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
            from mmengine.config import Config

            return json.dumps(Config.fromfile(str(path)).to_dict(), sort_keys=True, default=str)
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


class Workflow:
    """Runs stages in their folders under ``work_dir``, skipping those done with the same inputs."""

    def __init__(self, work_dir: Path, cwd: Optional[Path] = None, env: Optional[Dict[str, str]] = None,
                 log: Callable[[str], None] = print) -> None:
        self.work_dir, self.cwd, self.log = Path(work_dir), cwd, log
        self.env = dict(os.environ if env is None else env)
        self.fingerprints: Dict[str, str] = {}  # of the stages seen in this run, by name
        self.timings: Dict[str, float] = {}

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
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]

    @staticmethod
    def _read(path: Path) -> dict:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return {}

    def state(self, stage: Stage, fingerprint: str) -> str:
        """``done`` (skip), ``resume`` (killed midway with the same inputs, resumable) or ``run``."""
        out = Path(stage.out_dir)
        if self._read(out / MARKER).get('fingerprint') == fingerprint:
            return 'done'
        if stage.resume_file and self._read(out / STARTED).get('fingerprint') == fingerprint \
                and (out / stage.resume_file).exists():
            return 'resume'
        return 'run'

    def run(self, stage: Stage, execute: Optional[Callable[[Stage, List[str]], None]] = None) -> bool:
        """Run ``stage`` unless it is done; returns whether it ran. ``execute(stage, argv)`` runs the command
        (default: a subprocess with its output in ``<out_dir>/stage.log``) and raises when it fails."""
        fingerprint = self.fingerprint(stage)
        out = Path(stage.out_dir)
        state = self.state(stage, fingerprint)
        if state == 'done':
            self.fingerprints[stage.name] = fingerprint
            self.log(f'{stage.name}: done, skipped ({out})')
            return False
        if state == 'run':
            if out.exists():
                shutil.rmtree(out)  # a stale or half-written folder: never mixed with a new run's output
            out.mkdir(parents=True)
            for src, name in stage.copy_in:
                if Path(src).is_file():
                    shutil.copy(src, out / name)
        write_json_atomic(out / STARTED, dict(fingerprint=fingerprint, started=time.time()))
        self.log(f'{stage.name}: {"resuming" if state == "resume" else "running"} ({out})')
        began = time.time()
        if stage.action is not None:
            stage.action(stage)
        else:
            (execute or self.execute)(stage, stage.argv(resume=state == 'resume'))
        self.timings[stage.name] = time.time() - began
        write_json_atomic(out / MARKER, dict(fingerprint=fingerprint, command=stage.argv(),
                                             seconds=round(self.timings[stage.name], 1), finished=time.time()))
        self.fingerprints[stage.name] = fingerprint
        return True

    def execute(self, stage: Stage, argv: List[str]) -> None:
        """The command in a subprocess, its output appended to ``<out_dir>/stage.log``."""
        log = Path(stage.out_dir) / 'stage.log'
        with open(log, 'a') as f:
            f.write('$ ' + ' '.join(shlex.quote(a) for a in argv) + '\n')
            f.flush()
            proc = subprocess.run(argv, cwd=self.cwd, env={**self.env, **stage.env}, stdout=f,
                                  stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            tail = ''.join(log.read_text(errors='replace').splitlines(keepends=True)[-30:])
            raise RuntimeError(f'stage {stage.name} failed (exit {proc.returncode}); log {log}:\n{tail}')

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the work dir for this run: a second run in the same folder at the same time is refused (it would
        wipe the stages the first one is writing)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        path = self.work_dir / '.workflow.lock'
        with open(path, 'a+') as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.seek(0)
                raise RuntimeError(f'{self.work_dir} is in use by another run (pid {f.read().strip() or "?"}): '
                                   f'wait for it to end, or choose another work dir') from None
            f.seek(0)
            f.truncate()
            f.write(str(os.getpid()))
            f.flush()
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def run_all(self, stages: Sequence[Stage], until: Optional[str] = None) -> None:
        """The stages in order, stopping after ``until``."""
        for stage in stages:
            self.run(stage)
            if stage.name == until:
                break

    def preview(self, stages: Sequence[Stage]) -> List[str]:
        """Per stage: ``done``, ``resume``, ``run`` or ``run (inputs not made yet)`` as a plan would find it,
        without running anything."""
        states, changed = [], set()
        for stage in stages:
            try:
                if changed & set(stage.deps):
                    raise FileNotFoundError
                fp = self.fingerprint(stage)
                state = self.state(stage, fp)
                self.fingerprints[stage.name] = fp
            except (FileNotFoundError, RuntimeError):
                state = 'run (inputs not made yet)'
            if state != 'done':
                changed.add(stage.name)
            states.append(state)
        return states


def write_json_atomic(path: Path, data: object) -> None:
    """``data`` as JSON at ``path``, through a temporary file and a rename (never half written)."""
    path = Path(path)
    tmp = path.with_name(path.name + f'.tmp{os.getpid()}')
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)


def python_tool(repo: Path, script: str, *args: Arg) -> List[Arg]:
    """The argv of ``python tools/<script> args`` with this interpreter."""
    return [sys.executable, str(Path(repo) / 'tools' / script), *args]
