"""No process-wide surprises: ``import jetvit_mm.mm`` (what a config's ``custom_imports`` does) changes one thing
for a checkpoint or a model that is not this project's, on purpose: torch's weights-only allow-list gains the data
types of an mmengine runner checkpoint (a plain mmseg ViT checkpoint saved by mmseg's own runner now loads, with the
same tensors as its bare state dict). Foreign state dicts load (or fail) exactly as in a fresh interpreter that never
imported the plugin, through mmengine's loader, ``load_checkpoint`` and mmseg's ``init_model``; mmengine's
checkpoint loaders are the same functions before and after the import."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from .conftest import HANG_GUARD_S
from .test_framework_tools import run_framework_tool

pytestmark = pytest.mark.integration  # every test here starts a process (a tool, torchrun, a stage)

VIT_CONFIG = """
_base_ = ['mmseg::_base_/default_runtime.py', 'mmseg::_base_/datasets/cityscapes.py']
crop_size = (64, 128)
model = dict(
    type='EncoderDecoder',
    data_preprocessor=dict(type='SegDataPreProcessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           bgr_to_rgb=True, pad_val=0, seg_pad_val=255, size=crop_size),
    backbone=dict(type='VisionTransformer', img_size=crop_size, patch_size=16, embed_dims=32, num_layers=2,
                  num_heads=2, out_indices=(1, )),
    decode_head=dict(type='FCNHead', in_channels=32, channels=16, num_convs=1, num_classes=19, in_index=0),
    train_cfg=dict(), test_cfg=dict(mode='whole'))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root='{root}', pipeline=train_pipeline))
val_dataloader = val_evaluator = val_cfg = test_dataloader = test_evaluator = test_cfg = None
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.01))
param_scheduler = []
train_cfg = dict(type='IterBasedTrainLoop', max_iters=1)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=1),
                     logger=dict(type='LoggerHook', interval=1, log_metric_by_epoch=False))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
"""

# Loads every file the ways a framework user does and prints what came back (a summary of the tensors, the other
# values) or the exception, as JSON; with 'plugin' as argument it first imports jetvit_mm.mm.
CHECK = textwrap.dedent('''
    import hashlib, json, sys
    import torch
    from mmengine.runner import load_checkpoint
    from mmengine.runner.checkpoint import CheckpointLoader, _load_checkpoint

    def schemes():
        return {p: f'{f.__module__}.{f.__qualname__}' for p, f in CheckpointLoader._schemes.items()}

    def summary(obj):
        if torch.is_tensor(obj):
            return hashlib.sha256(obj.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()
        if isinstance(obj, dict):
            return {str(k): summary(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [summary(v) for v in obj]
        return repr(obj)

    def attempt(load):
        try:
            return summary(load())
        except Exception as error:
            return f'{type(error).__name__}: {error}'

    config, files = sys.argv[1], sys.argv[2:-1]
    before, loaders = schemes(), dict(CheckpointLoader._schemes)
    if sys.argv[-1] == 'plugin':
        import jetvit_mm.mm  # noqa: F401
    from mmseg.apis import init_model
    out = {'schemes_before': before, 'schemes_after': schemes(),
           'same_loader_objects': dict(CheckpointLoader._schemes).keys() == loaders.keys()
           and all(CheckpointLoader._schemes[p] is f for p, f in loaders.items())}
    for path in files:
        out[path] = {
            'mmengine_load': attempt(lambda: _load_checkpoint(path, map_location='cpu')),
            'load_checkpoint': attempt(lambda: (load_checkpoint(init_model(config, device='cpu'), path,
                                                                map_location='cpu'), None)[1]),
            'init_model': attempt(lambda: init_model(config, path, device='cpu').state_dict()),
        }
    print(json.dumps(out))
''')


def loaded(config: Path, files: list, plugin: bool) -> dict:
    """What :data:`CHECK` finds in a fresh interpreter, with or without ``import jetvit_mm.mm``."""
    proc = subprocess.run([sys.executable, '-c', CHECK, str(config), *map(str, files),
                           'plugin' if plugin else 'none'], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope='module')
def foreign(tiny_cityscapes, tmp_path_factory) -> dict:
    """An mmseg ViT segmentor's config, the checkpoint mmseg's own tools/train.py saved for it (no plugin in that
    process), its bare state dict, and a foreign checkpoint with config text in its meta."""
    root = tmp_path_factory.mktemp('foreign')
    config = root / 'vit_tiny.py'
    config.write_text(VIT_CONFIG.replace('{root}', str(tiny_cityscapes)))
    run_framework_tool('mmseg', 'train.py', config, '--work-dir', root / 'work', cwd=root)
    runner_ckpt = root / 'work' / 'iter_1.pth'
    state = torch.load(runner_ckpt, map_location='cpu', weights_only=False)['state_dict']  # written just above
    torch.save(state, root / 'state_dict.pth')
    torch.save({'state_dict': state, 'meta': {'config': 'x = 1\ny = x + 1\n', 'cfg': 'z = [i for i in range(2)]\n'}},
               root / 'with_config_text.pth')
    return dict(config=config, files=[runner_ckpt, root / 'state_dict.pth', root / 'with_config_text.pth'])


def test_plugin_import_changes_only_the_allow_list_for_foreign_checkpoints(foreign):
    without = loaded(foreign['config'], foreign['files'], plugin=False)
    with_plugin = loaded(foreign['config'], foreign['files'], plugin=True)
    assert with_plugin['schemes_after'] == with_plugin['schemes_before'] == without['schemes_before']
    assert with_plugin['same_loader_objects'], 'import jetvit_mm.mm replaced or wrapped a loader of mmengine'
    runner_ckpt, state_dict, _ = map(str, foreign['files'])
    for path in map(str, foreign['files'][1:]):
        assert with_plugin[path] == without[path], path
    # what mmengine does, reached: the runner's file is refused by torch's weights-only default, the state dict
    # loads (mmengine's load_checkpoint; mmseg's init_model wants a 'meta' in it: KeyError, as without the plugin)
    assert without[runner_ckpt]['mmengine_load'].startswith('UnpicklingError: Weights only load failed')
    # with the plugin the runner's file loads, still weights-only: its HistoryBuffers and numpy values are allowed
    assert with_plugin[runner_ckpt]['mmengine_load']['state_dict'] == without[state_dict]['mmengine_load']
    assert with_plugin[runner_ckpt]['load_checkpoint'] == 'None'
    assert isinstance(without[state_dict]['mmengine_load'], dict) and without[state_dict]['load_checkpoint'] == 'None'
