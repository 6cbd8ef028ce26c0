"""What the command-line tools share: plain-mistake checks reported as argparse usage errors."""
import argparse
from pathlib import Path
from typing import Sequence

import torch


def check_inputs(parser: argparse.ArgumentParser, args: argparse.Namespace, files: Sequence[str]) -> None:
    """``--device cuda*`` without a CUDA device, and any of the ``files`` arguments given but not a file, end the
    tool with argparse's usage message naming the problem (exit status 2)."""
    device = str(getattr(args, 'device', 'cpu'))
    if device.startswith('cuda') and not torch.cuda.is_available():
        parser.error(f'--device {device}: no CUDA device is available here (torch.cuda.is_available() is False); '
                     f'use --device cpu')
    for what in files:
        path = getattr(args, what, None)
        if path is not None and not Path(path).is_file():
            parser.error(f'{what.replace("_", "-")} file not found: {path}')
