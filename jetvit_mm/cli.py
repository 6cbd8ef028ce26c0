"""What the command-line tools share: every argument checked before any work, a mistake reported as argparse's usage
error naming the argument and what it accepts (exit status 2); bad input found later (a config, a damaged file, data)
refused with one ``error:`` line (:func:`run_main`, exit status 1)."""
import argparse
import logging
import math
import os
import pickle
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

from .process_state import set_switch, switch
from .processes import WorkDirBusy

__all__ = ['arch_string', 'check_inputs', 'check_outputs', 'count', 'finite', 'integer', 'not_writable', 'positive',
           'run_main']

# What the project raises for bad input, each naming the input, what is wrong and what to do: a value or a config
# (ValueError, TypeError for an option a class does not take), a file (OSError, a refused pickle), a busy work dir
REFUSALS = (ValueError, TypeError, OSError, pickle.UnpicklingError, WorkDirBusy)


def _number(kind: Callable[[str], Any], name: str, minimum: Any, maximum: Any, above: Any = None) -> Callable:
    """argparse type: ``kind(text)`` (``int``, or ``float``: finite), ``>= minimum``, ``> above`` and ``<= maximum``
    where given; named by what it accepts (argparse's message names it)."""
    bounds = ((minimum, '>='), (above, '>'), (maximum, '<='))
    wanted = ' '.join([name] + [f'{sign} {bound:g}' for bound, sign in bounds if bound is not None])

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'expected {wanted}, got {text!r}') from None
        if (not math.isfinite(value) or (minimum is not None and value < minimum)
                or (maximum is not None and value > maximum) or (above is not None and value <= above)):
            raise argparse.ArgumentTypeError(f'expected {wanted}, got {text}')
        return value

    parse.__name__ = wanted
    return parse


def finite(minimum: Optional[float] = None, maximum: Optional[float] = None,
           above: Optional[float] = None) -> Callable[[str], float]:
    """argparse type: a finite float, ``>= minimum``, ``<= maximum`` and ``> above`` where given."""
    return _number(float, 'a finite number', minimum, maximum, above)


def integer(minimum: Optional[int] = None, maximum: Optional[int] = None) -> Callable[[str], int]:
    """argparse type: an integer, ``>= minimum`` and ``<= maximum`` where given."""
    return _number(int, 'an integer', minimum, maximum)


positive, count = integer(minimum=1), integer(minimum=0)  # argparse types: an integer >= 1, >= 0


def arch_string(text: str) -> str:
    """argparse type: an arch string, one capital letter per layer. Which letters are valid is the model's to say (a
    plugin declares its own with ``mixers=``): the tools check them against the config's (:func:`check_arch_letters`),
    and the length against the model."""
    if not text or not all('A' <= letter <= 'Z' for letter in text):
        raise argparse.ArgumentTypeError(f'expected one capital mixer letter per layer (e.g. LWLLWWLLWFLF; a model '
                                         f'declares its letters with mixers=...), got {text!r}')
    return text


def check_arch_letters(parser: argparse.ArgumentParser, option: str, arch: Optional[str], letters: str,
                       depth: Optional[int] = None) -> None:
    """``arch`` (the value of ``option``) uses only ``letters``, the config's declared mixer letters, one per layer
    of a ``depth``-layer model (where known); otherwise argparse's usage error names the option and what is wrong."""
    from jetvit_mm.models.mixers import validate_arch

    if arch is None:
        return
    try:
        validate_arch(arch, letters=letters)
    except ValueError as error:
        parser.error(f'{option}: {error}')
    if depth is not None and len(arch) != depth:
        parser.error(f'{option} {arch}: {len(arch)} letters for the {depth} layers of CONFIG\'s backbone; give one '
                     f'mixer letter per layer, {depth} in all')


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


def _unregistered_type(error: KeyError) -> Optional[str]:
    """:func:`jetvit_mm.mm.registry.unregistered_type`'s line where mmengine raised ``error``, else None (the pure
    tools run without OpenMMLab and import none of it here)."""
    if 'mmengine.registry' not in sys.modules:
        return None
    from jetvit_mm.mm.registry import unregistered_type
    return unregistered_type(error)


def run_main(main: Callable[[], object], leave: Callable[[int], None] = os._exit) -> None:
    """Run a tool's ``main`` (``if __name__ == '__main__': run_main(main)``). Bad input (:data:`REFUSALS`) ends the
    tool with one line, ``error: <what the refusal says>`` (exit status 1; ``JETVIT_MM_TRACEBACK=1`` shows the
    traceback instead); so does mmengine's KeyError for a config ``type=`` no registry holds. Any other error
    propagates as usual.

    After a distributed run whose group ``process_group_teardown`` (``jetvit_mm.mm.engine.launch``) destroyed, the
    process leaves through ``leave(0)`` once its logs and output are flushed, without the interpreter's finalization:
    the gloo group's worker threads outlive ``destroy_process_group``, and one that drops its last tensors while the
    interpreter finalizes cannot take the GIL and aborts the rank (SIGABRT, "terminate called without an active
    exception"). A run without a group exits as usual."""
    set_switch('group_torn_down', False)
    try:
        main()
    except REFUSALS as error:
        if os.environ.get('JETVIT_MM_TRACEBACK') == '1':
            raise
        raise SystemExit('error: ' + '; '.join(line.strip() for line in str(error).splitlines() if line.strip())) \
            from None
    except KeyError as error:  # a config type= no registry holds (mmengine's words, with a traceback, otherwise)
        line = _unregistered_type(error)
        if line is None or os.environ.get('JETVIT_MM_TRACEBACK') == '1':
            raise
        raise SystemExit('error: ' + line) from None
    if switch('group_torn_down'):
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        leave(0)
