"""The config is the one entry point: mmseg's and mmdet's own ``tools/train.py`` and ``tools/test.py`` (the copies
their packages install under ``.mim/tools``, run unchanged, importing this plugin only through the config's
``custom_imports``) on this project's tiny distillation, probe and detection configs give what jetvit_mm's
``tools/train.py`` and ``tools/test.py`` give on the same config and seed: the same checkpoint tensors, arch spec
meta and digest, and the same metrics. Everything jetvit_mm's runner does is declared in ``configs/_base_``."""
import os
import re
import subprocess
import sys
from pathlib import Path

import mmdet
import mmseg
import pytest
import torch

from jetvit_mm.models.arch import SPEC_KEY, ArchSpec
from jetvit_mm.models.checkpoint.integrity import DIGEST_META_KEY

from .conftest import HANG_GUARD_S, REPO, run_tool

pytestmark = pytest.mark.integration  # every test here starts a process (a tool, torchrun, a stage)

CONFIGS = REPO / 'tests' / 'configs'
CASES = {  # name: (framework, config, iterations)
    'distill': ('mmseg', CONFIGS / 'distill_supernet_tiny_cityscapes.py', 2),
    'probe': ('mmseg', CONFIGS / 'seg_linear_probe_tiny_cityscapes.py', 2),
    'det': ('mmdet', CONFIGS / 'det_mask_rcnn_tiny_coco.py', 2),
}
FRAMEWORK_TOOLS = {name: Path(pkg.__file__).parent / '.mim' / 'tools' for name, pkg in (('mmseg', mmseg),
                                                                                         ('mmdet', mmdet))}


def run_framework_tool(framework: str, script: str, *args, cwd: Path) -> subprocess.CompletedProcess:
    """``python <mmseg|mmdet>/.mim/tools/<script> ...``: the framework's own script, as a user runs it."""
    env = {**os.environ, 'PYTHONUNBUFFERED': '1', 'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS', '2')}
    proc = subprocess.run([sys.executable, str(FRAMEWORK_TOOLS[framework] / script), *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, f'{framework} tools/{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}'
    return proc


@pytest.fixture(scope='module')
def data(tiny_cityscapes, tmp_path_factory) -> dict:
    from .fixtures.datasets import make_coco

    coco = make_coco(tmp_path_factory.mktemp('coco'), splits={'train2017': 2, 'val2017': 2}, size=(64, 96), seed=0)
    ann = coco / 'annotations' / 'instances_val2017.json'
    splits = ('train', 'val', 'test')
    return {
        'distill': [f'train_dataloader.dataset.data_root={tiny_cityscapes}'],
        'probe': [f'{s}_dataloader.dataset.data_root={tiny_cityscapes}' for s in splits],
        'det': [f'{s}_dataloader.dataset.data_root={coco}/' for s in splits]
        + [f'val_evaluator.ann_file={ann}', f'test_evaluator.ann_file={ann}'],
    }


def options(name: str, data: dict) -> list:
    iters = CASES[name][2]
    return ['--cfg-options', *data[name], f'train_cfg.max_iters={iters}', f'default_hooks.checkpoint.interval={iters}',
            'train_cfg.val_interval=100']


@pytest.fixture(scope='module')
def trained(data, tmp_path_factory) -> dict:
    """Each config trained by jetvit_mm's tools/train.py and by its framework's own, in separate work dirs."""
    root = tmp_path_factory.mktemp('framework_tools')
    out = {}
    for name, (framework, config, iters) in CASES.items():
        ours, theirs = root / name / 'ours', root / name / framework
        run_tool('train.py', config, '--work-dir', ours, *options(name, data), cwd=root)
        run_framework_tool(framework, 'train.py', config, '--work-dir', theirs, *options(name, data), cwd=root)
        out[name] = (ours / f'iter_{iters}.pth', theirs / f'iter_{iters}.pth')
    return out


@pytest.mark.parametrize('name', list(CASES))
def test_framework_train_tool_writes_our_checkpoint(trained, name):
    """Same state (every tensor equal, the arch spec in it), same digest; and the framework's file, like ours,
    loads with a plain weights-only ``torch.load`` (no allow-list, no loader of this project)."""
    ours, theirs = (torch.load(path, map_location='cpu', weights_only=True) for path in trained[name])
    assert ours['state_dict'].keys() == theirs['state_dict'].keys()
    differ = [k for k, v in ours['state_dict'].items() if not torch.equal(v, theirs['state_dict'][k])]
    assert not differ, differ[:8]
    specs = [k for k in ours['state_dict'] if k.endswith(SPEC_KEY)]
    assert specs, f'no arch spec in the state dict of {trained[name][0]}'
    assert all(ArchSpec.from_tensor(ours['state_dict'][k]) for k in specs)
    assert ours['meta'].get(DIGEST_META_KEY), f'no digest in the meta of {trained[name][0]}'
    assert theirs['meta'].get(DIGEST_META_KEY) == ours['meta'][DIGEST_META_KEY]


def logged_metrics(log: str) -> dict:
    """The metrics of the last ``Iter(test)`` line of an mmengine log (timings left out)."""
    line = [ln for ln in log.splitlines() if 'Iter(test)' in ln][-1]
    return {k: v for k, v in re.findall(r'([\w/.]+): (-?[\d.]+)', line.split(']', 1)[1]) if 'time' not in k}


@pytest.mark.parametrize('name', ['probe', 'det'])
def test_framework_test_tool_scores_as_ours(trained, data, name, tmp_path):
    """The framework's tools/test.py loads the checkpoint through the runner the config names, and scores it as
    jetvit_mm's tools/test.py does."""
    framework, config, _ = CASES[name]
    checkpoint = trained[name][1]  # the one the framework's own train.py wrote
    ours = run_tool('test.py', config, checkpoint, '--work-dir', tmp_path / 'ours', '--cfg-options', *data[name],
                    cwd=tmp_path)
    theirs = run_framework_tool(framework, 'test.py', config, checkpoint, '--work-dir', tmp_path / framework,
                                '--cfg-options', *data[name], cwd=tmp_path)
    ours, theirs = (logged_metrics(p.stdout + p.stderr) for p in (ours, theirs))
    assert ours and ours == theirs
