"""The corridor of a checkpoint load, per tool: how often each tool opens the checkpoint files it is given, and which
files of ``jetvit_mm`` the load passes through (issues 40 and 47's before/after figures).

    .venv/bin/python scripts/measure_checkpoint_load.py [REPO]     # REPO: a checkout (default: this one)

Measured, each in a fresh interpreter on tiny generated data: ``tools/infer.py`` on a probe checkpoint that carries its
config, ``tools/test.py`` on the same checkpoint, ``tools/train.py --resume`` of a supernet distillation checkpoint
(its config's seed unset, so that the seed comes from the checkpoint) and ``tools/search.py`` on that checkpoint with
the probe as ``--head-checkpoint``. A read is a ``torch.load`` of the file; an open, an ``open`` or a memory map of it
(a read checks the file's start first, and a mapped read opens the file to map it). A
file of ``jetvit_mm`` counts when one of its functions runs while a checkpoint function is on the stack (one in a
file or of a name that says checkpoint, saved config or config text, or one of :data:`APPLIERS`), unless it runs
inside a constructor called from there (building the model is not loading it) or in ``tools/test.py``'s evaluation.
"""
import builtins
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

MEASURING = __name__ == '__main__' and sys.argv[1:2] == ['--count']  # a tool's run, in its own interpreter
REPO = Path(os.environ['MEASURED_REPO'] if MEASURING else sys.argv[1] if __name__ == '__main__' and sys.argv[1:]
            else Path(__file__).parents[1]).resolve()  # imported (a test): this checkout
PROBE = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'
DISTILL = REPO / 'tests' / 'configs' / 'distill_supernet_tiny_cityscapes.py'
# the functions that read or apply a checkpoint, today's and those before issue 47 (for the figures before it)
APPLIERS = ('read', 'fit', 'prepare_jetvit_state', 'load_jetvit_state_dict', 'check_fits', 'load_weights',
            'load_supernet', 'load_downstream_heads', 'read_weights', 'load_model', 'set_extra_state')
ENV = {**os.environ, 'PYTHONPATH': str(REPO), 'MEASURED_REPO': str(REPO), 'OMP_NUM_THREADS': '2',
       'PYTHONWARNINGS': 'ignore'}


def counted(real, what, targets, opened):
    def call(file, *args, **kwargs):
        name = file if isinstance(file, (str, os.PathLike)) else getattr(file, 'name', None)
        if isinstance(name, (str, os.PathLike)) and Path(name).resolve() in targets:
            opened.append((str(Path(name).resolve()), what))
        return real(file, *args, **kwargs)
    return call


def count(targets, tool, argv) -> None:
    """Run ``tools/<tool>``'s main with ``argv`` here, counting opens of ``targets``; print the figures as JSON."""
    import importlib.util

    import torch
    from mmseg.apis import init_model  # noqa: F401  (imported before the count: module code is not the load's)

    import jetvit_mm.mm  # noqa: F401
    targets = {Path(t).resolve() for t in targets}
    opened, files = [], set()
    spec = importlib.util.spec_from_file_location(f'measured_{tool}', REPO / 'tools' / f'{tool}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    builtins.open = counted(builtins.open, 'open', targets, opened)
    io.open = counted(io.open, 'io.open', targets, opened)
    torch.load = counted(torch.load, 'torch.load', targets, opened)
    torch.UntypedStorage.from_file = counted(torch.UntypedStorage.from_file, 'mmap', targets, opened)
    package = str(REPO / 'jetvit_mm') + os.sep

    def in_checkpoint_code(frame) -> bool:
        while frame is not None:
            path, name = frame.f_code.co_filename, frame.f_code.co_name
            if name in ('__init__', 'test_checkpoint'):  # building a model, evaluating one: not loading it
                return False
            named = 'checkpoint' in name or name in APPLIERS
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
        module.main(argv)
    finally:
        sys.setprofile(None)
    per_file = {Path(t).name: dict(reads=sum(path == str(t) and what == 'torch.load' for path, what in opened),
                                   opens=sum(path == str(t) and what != 'torch.load' for path, what in opened))
                for t in sorted(targets)}
    print('MEASURED ' + json.dumps(dict(opens=per_file, files=sorted(files))))


def run(tool, targets, *args) -> dict:
    command = [sys.executable, __file__, '--count', ','.join(map(str, targets)), tool, *map(str, args)]
    proc = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith('MEASURED ')]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f'tools/{tool}.py failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}')
    return json.loads(lines[-1][len('MEASURED '):])


def prepare(tmp: Path) -> dict:
    """Tiny data, a probe checkpoint carrying its config, a supernet distillation checkpoint (not measured)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import cv2
    import numpy as np
    import torch
    from mmseg.apis import init_model

    import jetvit_mm.mm  # noqa: F401
    from jetvit_mm.mm.engine.launch import read_config
    from jetvit_mm.models.checkpoint import save
    from tests.fixtures.datasets import make_cityscapes
    from tests.test_supernet import make_teacher_checkpoint

    data = make_cityscapes(tmp / 'cityscapes', splits={'train': 2, 'val': 1}, size=(64, 128), seed=0)
    cfg = read_config(str(PROBE))
    torch.manual_seed(0)
    probe = tmp / 'probe.pth'
    save({'state_dict': init_model(cfg, None, device='cpu').state_dict(), 'meta': {'cfg': cfg.pretty_text}}, probe)
    image = tmp / 'img.png'
    cv2.imwrite(str(image), np.zeros((32, 48, 3), np.uint8))
    teacher = make_teacher_checkpoint(tmp / 'teacher.pth')
    train = [sys.executable, str(REPO / 'tools' / 'train.py'), str(DISTILL), '--work-dir', str(tmp / 'distill')]
    subprocess.run(train + ['--cfg-options', f'train_dataloader.dataset.data_root={data}',
                            f'model.teacher.checkpoint={teacher}', 'train_cfg.max_iters=1',
                            'default_hooks.checkpoint.interval=1'], cwd=REPO, env=ENV, check=True, capture_output=True)
    return dict(data=data, probe=probe, image=image, supernet=tmp / 'distill' / 'iter_1.pth')


def measure(tmp: Path) -> dict:
    """``{tool: {'opens': {file name: {'reads': n, 'opens': n}}, 'files': [...]}}`` for the measured tools."""
    p = prepare(tmp)
    data = str(p['data'])
    return {
        'tools/infer.py': run('infer', [p['probe']], p['probe'], p['image'], '--out-dir', tmp / 'out'),
        'tools/test.py': run('test', [p['probe']], PROBE, p['probe'], '--work-dir', tmp / 'test', '--cfg-options',
                             f'test_dataloader.dataset.data_root={data}'),
        'tools/train.py --resume': run('train', [p['supernet']], DISTILL, '--resume', p['supernet'], '--work-dir',
                                       tmp / 'resume', '--cfg-options', f'train_dataloader.dataset.data_root={data}',
                                       'train_cfg.max_iters=2', 'default_hooks.checkpoint.interval=100',
                                       'randomness.seed=None'),
        'tools/search.py': run('search', [p['supernet'], p['probe']], PROBE, p['supernet'], '--stage', '1',
                               '--head-checkpoint', p['probe'], '--metric', 'mIoU', '--beam-width', '1',
                               '--min-gain', '100', '--work-dir', tmp / 'search', '--cfg-options',
                               f'val_dataloader.dataset.data_root={data}'),
    }


def main() -> None:
    results = measure(Path(tempfile.mkdtemp()))
    for tool, found in results.items():
        reads = '; '.join(f'{name} read {n["reads"]}x ({n["opens"]} opens)' for name, n in found['opens'].items())
        print(f'{tool}: {reads}; files of jetvit_mm passed through: {len(found["files"])}')
    for tool, found in results.items():
        print(f'files of jetvit_mm {tool}\'s load passes through:')
        for path in found['files']:
            print('  ', path)


if __name__ == '__main__':
    if MEASURING:
        sys.path.insert(0, str(REPO))
        count(sys.argv[2].split(','), sys.argv[3], sys.argv[4:])
    else:
        main()
