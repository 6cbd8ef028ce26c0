"""A stage of the method's workflow and its arguments: a named command (one of our tools run as a user runs it, or a
Python step), its own output folder, what it reads. Arguments that only exist once an earlier stage ran are
:class:`FileText` (a file's stripped text, e.g. the arch a search picked) and :class:`Join` (pieces glued into one
argument); ``--plan`` prints them as ``$(cat FILE)``."""
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union


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


def python_tool(repo: Path, script: str, *args: Arg) -> List[Arg]:
    """The argv of ``python tools/<script> args`` with this interpreter."""
    return [sys.executable, str(Path(repo) / 'tools' / script), *args]
