"""What the command-line tools share: every argument checked before any work, a mistake reported as argparse's usage
error naming the argument and what it accepts (exit status 2)."""
import argparse
import math
import os
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

__all__ = ['arch_string', 'check_inputs', 'check_outputs', 'count', 'finite', 'integer', 'not_writable', 'positive']


def finite(minimum: Optional[float] = None, maximum: Optional[float] = None,
           above: Optional[float] = None) -> Callable[[str], float]:
    """argparse type: a finite float, ``>= minimum``, ``<= maximum`` and ``> above`` where given."""
    bounds = [f'>= {minimum:g}' if minimum is not None else '', f'> {above:g}' if above is not None else '',
              f'<= {maximum:g}' if maximum is not None else '']
    wanted = ' '.join(['a finite number'] + [b for b in bounds if b])

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'expected {wanted}, got {text!r}') from None
        if (not math.isfinite(value) or (minimum is not None and value < minimum)
                or (maximum is not None and value > maximum) or (above is not None and value <= above)):
            raise argparse.ArgumentTypeError(f'expected {wanted}, got {text}')
        return value

    parse.__name__ = wanted
    return parse


def integer(minimum: Optional[int] = None, maximum: Optional[int] = None) -> Callable[[str], int]:
    """argparse type: an integer, ``>= minimum`` and ``<= maximum`` where given."""
    bounds = [f'>= {minimum}' if minimum is not None else '', f'<= {maximum}' if maximum is not None else '']
    wanted = ' '.join(['an integer'] + [b for b in bounds if b])

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'expected {wanted}, got {text!r}') from None
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f'expected {wanted}, got {value}')
        return value

    parse.__name__ = wanted
    return parse


def positive(text: str) -> int:
    """argparse type: an integer >= 1."""
    return integer(minimum=1)(text)


def count(text: str) -> int:
    """argparse type: an integer >= 0."""
    return integer(minimum=0)(text)


positive.__name__, count.__name__ = 'an integer >= 1', 'an integer >= 0'


def arch_string(text: str) -> str:
    """argparse type: an arch string, one capital letter per layer. Which letters are valid is the model's to say (a
    plugin declares its own with ``mixers=``): the tools check them against the config's (:func:`check_arch_letters`),
    and the length against the model."""
    if not text or not all('A' <= letter <= 'Z' for letter in text):
        raise argparse.ArgumentTypeError(f'expected one capital mixer letter per layer (e.g. LWLLWWLLWFLF; a model '
                                         f'declares its letters with mixers=...), got {text!r}')
    return text


def check_arch_letters(parser: argparse.ArgumentParser, option: str, arch: Optional[str], letters: str) -> None:
    """``arch`` (the value of ``option``) uses only ``letters``, the config's declared mixer letters; otherwise
    argparse's usage error names the option, the bad letters and the valid ones."""
    from jetvit_mm.models.mixers import validate_arch

    if arch is None:
        return
    try:
        validate_arch(arch, letters=letters)
    except ValueError as error:
        parser.error(f'{option}: {error}')


def _flag(name: str) -> str:
    return '--' + name.replace('_', '-')


def check_inputs(parser: argparse.ArgumentParser, args: argparse.Namespace, files: Sequence[str],
                 dirs: Sequence[str] = ()) -> None:
    """``--device cuda*`` without a CUDA device, and any of the ``files`` (``dirs``) arguments given but not an
    existing file (folder), end the tool with argparse's usage message naming the problem (exit status 2)."""
    device = str(getattr(args, 'device', 'cpu'))
    if device.startswith('cuda') and not torch.cuda.is_available():
        parser.error(f'--device {device}: no CUDA device is available here (torch.cuda.is_available() is False); '
                     f'use --device cpu')
    for what in files:
        path = getattr(args, what, None)
        if path is not None and not Path(path).is_file():
            parser.error(f'{what.replace("_", "-")} file not found: {path}')
    for what in dirs:
        path = getattr(args, what, None)
        if path is not None and not Path(path).is_dir():
            parser.error(f'{what.replace("_", "-")} folder not found: {path}')


def not_writable(path: Any, folder: bool = False) -> Optional[str]:
    """Why ``path`` cannot be written as a file (``folder``: created or used as a folder), or None if it can: an
    existing file or folder of the wrong kind, an unwritable folder, or a missing one that cannot be created."""
    path = Path(path).expanduser().absolute()
    if path.exists():
        if folder != path.is_dir():
            return f'{path} exists and is {"not a folder" if folder else "a folder"}'
        where = path if folder else path.parent
        return None if os.access(where, os.W_OK) else f'{where} is not writable'
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f'{path} cannot be created: {parent} is a file, not a folder'
    if not os.access(parent, os.W_OK | os.X_OK):
        return f'{path} cannot be created: {parent} is not writable'
    return None


def check_outputs(parser: argparse.ArgumentParser, args: argparse.Namespace, files: Sequence[str] = (),
                  dirs: Sequence[str] = ()) -> None:
    """Each of the ``files`` (``dirs``) arguments that is given must be a file (folder) this process can write or
    create: checked before any work, so that a run does not fail at its end when it writes its output."""
    for names, folder in ((files, False), (dirs, True)):
        for what in names:
            path = getattr(args, what, None)
            reason = None if path is None else not_writable(path, folder)
            if reason:
                parser.error(f'{_flag(what)} {path}: {reason}')

