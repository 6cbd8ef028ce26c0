"""Checkpoints that jetvit_mm's tools write load in the frameworks' own clients with no extra call, only the
config's ``custom_imports``: mmseg's ``init_model`` + ``inference_model`` and ``MMSegInferencer``, mmdet's
``init_detector`` + ``inference_detector`` and ``DetInferencer`` (with mmengine's own loader: the files are plain
data, see ``CheckpointDigestHook``), and mmseg's and mmdet's own ``tools/test.py`` (the scripts their packages ship,
run as a user runs them, through the runner the config names). Unsafe pickles stay refused there, their payload
never runs; the frameworks' clients refuse them with torch's weights-only error, the tools with jetvit_mm's, which
names what to do."""
import os
import re
import subprocess
import sys
from pathlib import Path

import mmdet
import mmseg
import pytest
import torch

from .conftest import HANG_GUARD_S, REPO, run_tool
from .test_checkpoint_loading import pickled_globals

pytestmark = pytest.mark.integration  # every test here starts a process

SEG = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'
DET = REPO / 'tests' / 'configs' / 'det_mask_rcnn_tiny_coco.py'
FRAMEWORK_TEST = {name: Path(pkg.__file__).parent / '.mim' / 'tools' / 'test.py'
                  for name, pkg in (('mmseg', mmseg), ('mmdet', mmdet))}


def seg_options(root: Path) -> list:
    return [f'{split}_dataloader.dataset.data_root={root}' for split in ('train', 'val', 'test')]


def det_options(root: Path) -> list:
    ann = root / 'annotations' / 'instances_val2017.json'
    return ([f'{split}_dataloader.dataset.data_root={root}/' for split in ('train', 'val', 'test')]
            + [f'val_evaluator.ann_file={ann}', f'test_evaluator.ann_file={ann}'])


@pytest.fixture(scope='module')
def trained(tiny_cityscapes, tmp_path_factory) -> dict:
    """A segmentation probe and a Mask R-CNN, each trained for 2 iterations by jetvit_mm's tools/train.py."""
    from .fixtures.datasets import make_coco

    root = tmp_path_factory.mktemp('clients')
    coco = make_coco(root / 'coco', splits={'train2017': 2, 'val2017': 2}, size=(64, 96), seed=0)
    run_tool('train.py', SEG, '--work-dir', root / 'seg', '--cfg-options', *seg_options(tiny_cityscapes),
             'train_cfg.max_iters=2', 'train_cfg.val_interval=100')
    run_tool('train.py', DET, '--work-dir', root / 'det', '--cfg-options', *det_options(coco),
             'train_cfg.max_iters=2', 'train_cfg.val_interval=100')
    return dict(root=root, cityscapes=tiny_cityscapes, coco=coco, seg=root / 'seg' / 'iter_2.pth',
                det=root / 'det' / 'iter_2.pth')


def _saved_state(path: Path) -> dict:
    from jetvit_mm.models.checkpoint import read

    return read(str(path)).raw['state_dict']


def assert_loaded(model: torch.nn.Module, path: Path) -> None:
    """Every tensor of ``model`` equals the checkpoint's: the weights were loaded, not left as initialised."""
    saved = _saved_state(path)
    state = {k: v for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
    assert state.keys() <= saved.keys(), sorted(state.keys() - saved.keys())[:8]
    differ = [k for k, v in state.items() if not torch.equal(v.cpu(), saved[k])]
    assert not differ, differ[:8]


def _image(root: Path, pattern: str) -> str:
    return str(sorted(root.glob(pattern))[0])


def run_framework_test(name: str, config: Path, checkpoint: Path, work_dir: Path, options: list,
                       env: dict = None) -> subprocess.CompletedProcess:
    """``python <mmseg|mmdet>/.mim/tools/test.py CONFIG CHECKPOINT``: the framework's own script, unchanged."""
    env = {**os.environ, 'PYTHONUNBUFFERED': '1', **(env or {})}
    return subprocess.run([sys.executable, str(FRAMEWORK_TEST[name]), str(config), str(checkpoint), '--work-dir',
                           str(work_dir), '--cfg-options', *options], cwd=work_dir.parent, env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)


def test_mmseg_api_and_inferencer_load_a_trained_checkpoint(trained):
    from mmseg.apis import MMSegInferencer, inference_model, init_model

    image = _image(trained['cityscapes'], 'leftImg8bit/val/*/*.png')
    model = init_model(str(SEG), str(trained['seg']), device='cpu')
    assert_loaded(model, trained['seg'])
    pred = inference_model(model, image).pred_sem_seg.data
    inferencer = MMSegInferencer(str(SEG), str(trained['seg']), device='cpu')
    assert_loaded(inferencer.model, trained['seg'])
    again = inferencer(image, return_datasamples=True).pred_sem_seg.data
    assert pred.shape[-2:] == again.shape[-2:] == (64, 128)
    assert torch.equal(pred.cpu(), again.cpu())
    # the config taken from the checkpoint itself (its literal-only saved text)
    from_weights = MMSegInferencer(model=None, weights=str(trained['seg']), device='cpu')
    assert torch.equal(from_weights(image, return_datasamples=True).pred_sem_seg.data.cpu(), pred.cpu())


def test_mmdet_api_and_inferencer_load_a_trained_checkpoint(trained):
    from mmdet.apis import DetInferencer, inference_detector, init_detector

    image = _image(trained['coco'], 'val2017/*')
    model = init_detector(str(DET), str(trained['det']), device='cpu')
    assert_loaded(model, trained['det'])
    boxes = inference_detector(model, image).pred_instances.bboxes
    assert boxes.shape[-1] == 4 and len(boxes) > 0  # score_thr=0 in the tiny config: an untrained model has boxes
    inferencer = DetInferencer(str(DET), str(trained['det']), device='cpu', show_progress=False)
    assert_loaded(inferencer.model, trained['det'])
    again = inferencer(image, return_datasamples=True)['predictions'][0].pred_instances.bboxes
    torch.testing.assert_close(again.cpu(), boxes.cpu())


@pytest.mark.parametrize('name', ['mmseg', 'mmdet'])
def test_frameworks_own_test_script_evaluates_the_checkpoint(trained, name, tmp_path):
    config, checkpoint = (SEG, trained['seg']) if name == 'mmseg' else (DET, trained['det'])
    options = seg_options(trained['cityscapes']) if name == 'mmseg' else det_options(trained['coco'])
    proc = run_framework_test(name, config, checkpoint, tmp_path / 'work', options)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert f'Load checkpoint from {checkpoint}' in out or 'Loads checkpoint' in out, out[-2000:]
    assert ('mIoU:' if name == 'mmseg' else 'coco/bbox_mAP:') in out, out[-2000:]


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


def test_unsafe_pickle_is_refused_in_every_framework_client(trained, tmp_path):
    """A payload in a checkpoint's pickle: every client refuses the file and the payload never runs. The frameworks'
    API clients load with mmengine's own loader (the plugin changes none of it): torch's weights-only refusal naming
    the global; mmdet's ``tools/test.py`` builds our configs' ``runner_type`` (JetViTRunner): the error names
    jetvit_mm's loader, that the file stays refused, and what to do instead; mmseg's ``tools/test.py`` builds
    mmengine's plain Runner whatever the config says: torch's refusal."""
    from mmdet.apis import DetInferencer, init_detector
    from mmseg.apis import MMSegInferencer, init_model


    marker = tmp_path / 'payload_ran'
    poisoned = {}
    for kind in ('seg', 'det'):
        raw = torch.load(trained[kind], map_location='cpu', weights_only=False)  # our own file, written above
        raw['meta']['extra'] = _Exploit(marker)
        poisoned[kind] = tmp_path / f'{kind}_poisoned.pth'
        torch.save(raw, poisoned[kind])
    refused = r"(?s)Weights only load failed.*(posix|os)\.system"
    for client in (lambda: init_model(str(SEG), str(poisoned['seg']), device='cpu'),
                   lambda: MMSegInferencer(str(SEG), str(poisoned['seg']), device='cpu'),
                   lambda: init_detector(str(DET), str(poisoned['det']), device='cpu'),
                   lambda: DetInferencer(str(DET), str(poisoned['det']), device='cpu')):
        with pytest.raises(Exception, match=refused):
            client()
    for name, kind, options in (('mmseg', 'seg', seg_options(trained['cityscapes'])),
                                ('mmdet', 'det', det_options(trained['coco']))):
        proc = run_framework_test(name, SEG if kind == 'seg' else DET, poisoned[kind], tmp_path / f'{name}_work',
                                  options)
        assert proc.returncode != 0, f"{name}'s tools/test.py accepted a pickle payload"
        if name == 'mmdet':  # mmdet's tools/test.py builds the config's runner_type: JetViTRunner's loading
            assert "refused by jetvit_mm's checkpoint loader" in proc.stderr and 'stays refused' in proc.stderr, \
                proc.stderr[-3000:]
        else:  # mmseg's tools/test.py builds mmengine's plain Runner whatever runner_type says: torch's refusal
            assert re.search(refused, proc.stderr), proc.stderr[-3000:]
    assert not marker.exists(), 'the pickle payload ran'


# A user's own mmseg config: mmseg's bases only, the plugin through custom_imports, no runner_type (mmengine's plain
# Runner writes the checkpoint: its message hub holds HistoryBuffer objects and numpy values).
USER_CONFIG = """
_base_ = ['mmseg::_base_/default_runtime.py', 'mmseg::_base_/datasets/cityscapes.py',
          'mmseg::_base_/schedules/schedule_20k.py']
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)
crop_size = (64, 128)
data_root = '{root}'
model = dict(
    type='EncoderDecoder',
    data_preprocessor=dict(type='SegDataPreProcessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           bgr_to_rgb=True, pad_val=0, seg_pad_val=255, size=crop_size),
    backbone=dict(type='JetViT', model_name='dinov3_vits16', arch='LWLF', embed_dim=32, depth=4, num_heads=2,
                  mixers=dict(L=dict(type='LinearAttention'), W=dict(type='WindowAttention', window_size=4),
                              F=dict(type='FullAttention'))),
    decode_head=dict(type='LinearProbeHead', in_channels=32, num_classes=19),
    train_cfg=dict(), test_cfg=dict(mode='whole'))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(128, 64), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
train_cfg = dict(type='IterBasedTrainLoop', max_iters=2, val_interval=100)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2),
                     logger=dict(type='LoggerHook', interval=1, log_metric_by_epoch=False))
"""


def test_a_users_own_config_with_only_custom_imports_trains_and_loads_in_the_clients(tiny_cityscapes, tmp_path):
    """The one line (issue 40): a config of mmseg's bases + ``custom_imports`` trains with tools/train.py, and its
    checkpoint (mmengine's plain Runner: HistoryBuffer objects, numpy values) loads weights-only in ``init_model`` and
    ``MMSegInferencer`` with mmengine's own loader (the plugin allows those data types, nothing else)."""
    from mmseg.apis import MMSegInferencer, inference_model, init_model

    config = tmp_path / 'my_jetvit.py'
    config.write_text(USER_CONFIG.replace('{root}', str(tiny_cityscapes)))
    run_tool('train.py', config, '--work-dir', tmp_path / 'work')
    checkpoint = tmp_path / 'work' / 'iter_2.pth'
    names = pickled_globals(checkpoint)
    assert any(name.endswith('HistoryBuffer') for name in names), names  # the case of the issue
    image = _image(tiny_cityscapes, 'leftImg8bit/val/*/*.png')
    model = init_model(str(config), str(checkpoint), device='cpu')
    assert_loaded(model, checkpoint)
    pred = inference_model(model, image).pred_sem_seg.data
    inferencer = MMSegInferencer(str(config), str(checkpoint), device='cpu')
    assert_loaded(inferencer.model, checkpoint)
    assert torch.equal(inferencer(image, return_datasamples=True).pred_sem_seg.data.cpu(), pred.cpu())
