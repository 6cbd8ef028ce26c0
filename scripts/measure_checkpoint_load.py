"""The corridor of one checkpoint load: ``tools/infer.py`` on a probe checkpoint that carries its config, which files
of ``jetvit_mm`` it passes through and how often it opens the file (issue 40's before/after figures).

    .venv/bin/python scripts/measure_checkpoint_load.py [REPO]     # REPO: a checkout (default: this one)

A file counts when one of its functions runs while a checkpoint function is on the stack (one in a file or of a name
that says checkpoint, saved config or config text, or ``read`` / ``fit`` / ``prepare_jetvit_state``). REPO may be an
older commit's worktree (before the checkpoint package: ``jetvit_mm.models.checkpoints.save_checkpoint``)."""
import builtins
import importlib.util
import io
import os
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
import torch

REPO = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[1]).resolve()
sys.path.insert(0, str(REPO))
os.chdir(REPO)

from mmseg.apis import init_model  # noqa: E402

import jetvit_mm.mm  # noqa: E402,F401

try:
    from jetvit_mm.mm.engine.launch import read_config
except ImportError:  # before mm/ was grouped
    from jetvit_mm.mm.launch import read_config
try:
    from jetvit_mm.models.checkpoint import save
except ImportError:  # before the checkpoint package
    from jetvit_mm.models.checkpoints import save_checkpoint as save


def counted(real, what, target, opened):
    def call(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and Path(file).resolve() == target:
            opened.append(what)
        return real(file, *args, **kwargs)
    return call


def main() -> None:
    spec = importlib.util.spec_from_file_location('infer_tool', REPO / 'tools' / 'infer.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tmp = Path(tempfile.mkdtemp())
    cfg = read_config(str(REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'))
    torch.manual_seed(0)
    state = init_model(cfg, None, device='cpu').state_dict()
    checkpoint = tmp / 'probe.pth'
    save({'state_dict': state, 'meta': {'cfg': cfg.pretty_text}}, checkpoint)
    image = tmp / 'img.png'
    cv2.imwrite(str(image), np.zeros((32, 48, 3), np.uint8))
    target, opened, files = checkpoint.resolve(), [], set()
    builtins.open = counted(builtins.open, 'open', target, opened)
    io.open = counted(io.open, 'io.open', target, opened)
    torch.load = counted(torch.load, 'torch.load', target, opened)
    torch.UntypedStorage.from_file = counted(torch.UntypedStorage.from_file, 'mmap', target, opened)
    package = str(REPO / 'jetvit_mm') + os.sep

    def in_checkpoint_code(frame) -> bool:
        while frame is not None:
            path, name = frame.f_code.co_filename, frame.f_code.co_name
            named = 'checkpoint' in name or name in ('read', 'fit', 'prepare_jetvit_state')
            in_file = any(k in path for k in ('checkpoint', 'saved_config', 'config_text'))
            if path.startswith(package) and (named or in_file):
                return True
            frame = frame.f_back
        return False

    def profile(frame, event, arg):
        if event == 'call' and frame.f_code.co_filename.startswith(package) and in_checkpoint_code(frame):
            files.add(frame.f_code.co_filename[len(str(REPO)) + 1:])

    sys.setprofile(profile)
    try:
        tool.main([str(checkpoint), str(image), '--out-dir', str(tmp / 'out')])
    finally:
        sys.setprofile(None)
    print(f'opens of the file: {len(opened)} ({", ".join(opened)})')
    print(f'files of jetvit_mm passed through: {len(files)}')
    for path in sorted(files):
        print('  ', path)


if __name__ == '__main__':
    main()
