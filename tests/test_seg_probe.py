"""Linear-probe configs: frozen-backbone training and sliding-window testing through the tools, label conventions.

The real probe configs (configs/probe/) are loaded and checked as data; the tiny probe configs run end to end on
generated Cityscapes and ADE20K copies. Model building of the real configs is tests/test_configs.py's job.
"""
import inspect
import json
import re
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config, ConfigDict
from mmengine.registry import DefaultScope
from PIL import Image

from jetvit_mm.models.checkpoint import read
from jetvit_mm.models.mixers import default_mixers

from .conftest import REPO, run_tool

CONFIGS = REPO / 'configs'
PROBES = {f'{size}_{data}': CONFIGS / 'probe' / f'dinov3_{size}_linear_{data}.py'
          for size in ('base', 'large') for data in ('cityscapes', 'ade20k')}
TINY = {'cityscapes': REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes_slide.py',
        'ade20k': REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_ade20k.py'}
SCHEDULES = {name: CONFIGS / '_base_' / 'schedules' / f'{name}.py' for name in ('probe_paper_5k', 'probe_dinov3_40k')}
IGNORE = 255
PATCH = 16
TRAIN_ITERS = 3


@cache
def load(path: Path) -> Config:
    return Config.fromfile(path)


def data_options(root: Path) -> list:
    return [f'{split}_dataloader.dataset.data_root={root}' for split in ('train', 'val', 'test')]


def pipeline_step(pipeline: list, name: str) -> dict:
    steps = [step for step in pipeline if step['type'] == name]
    assert len(steps) == 1, pipeline
    return steps[0]


def build_dataset(cfg: ConfigDict, root: Path, pipeline: list):
    """The config's dataset on generated data, read through ``pipeline``."""
    import mmseg.datasets  # noqa: F401  (registers datasets and transforms)
    from mmseg.registry import DATASETS

    with DefaultScope.overwrite_default_scope('mmseg'):
        return DATASETS.build(dict(cfg, data_root=str(root), pipeline=pipeline))


def png(path: str) -> np.ndarray:
    return np.asarray(Image.open(path))


# ------------------------------------------------------------------ generated data and the backbone's weights
@pytest.fixture(scope='module')
def tiny_ade20k(tmp_path_factory) -> Path:
    from .fixtures.datasets import make_ade20k
    return make_ade20k(tmp_path_factory.mktemp('ade') / 'ADEChallengeData2016',
                       splits={'training': 4, 'validation': 2}, size=(64, 64), seed=0)


@pytest.fixture(scope='module')
def backbone_checkpoint(tmp_path_factory) -> Path:
    """Weights for the tiny configs' JetViT, drawn with a seed the runner does not use (its own is 0)."""
    from jetvit_mm.models.jetvit import JetViT

    args = {name: dict(load(TINY[name]).model.backbone) for name in TINY}
    assert args['cityscapes'] == args['ade20k'], 'both tiny configs share one backbone'
    args = {k: v for k, v in args['cityscapes'].items() if k not in ('type', 'checkpoint')}
    torch.manual_seed(1234)
    path = tmp_path_factory.mktemp('backbone') / 'jetvit_tiny.pth'
    torch.save(JetViT(**args).state_dict(), path)
    return path


@pytest.fixture(scope='module')
def probe_runs(tiny_cityscapes, tiny_ade20k, backbone_checkpoint, tmp_path_factory) -> dict:
    """Per dataset: train the tiny probe for a few iterations from known backbone weights, a checkpoint each.

    Both are then evaluated by tools/test.py (Cityscapes with sliding windows); ADE20K also validates at the
    end of training. The two datasets run side by side.
    """
    roots = {'cityscapes': tiny_cityscapes, 'ade20k': tiny_ade20k}

    def run(name: str) -> dict:
        work = tmp_path_factory.mktemp(f'probe_{name}')
        validate = [] if name == 'ade20k' else ['train_cfg.val_begin=1000']
        options = [f'model.backbone.checkpoint={backbone_checkpoint}', f'train_cfg.max_iters={TRAIN_ITERS}',
                   'default_hooks.checkpoint.interval=1', f'default_hooks.checkpoint.max_keep_ckpts={TRAIN_ITERS}']
        train = run_tool('train.py', TINY[name], '--work-dir', work, '--cfg-options', *data_options(roots[name]),
                         *options, *validate)
        result = dict(work=work, train_log=train.stdout + train.stderr)
        metrics = work / 'metrics.json'
        test = run_tool('test.py', TINY[name], work / f'iter_{TRAIN_ITERS}.pth', '--work-dir', work / 'test',
                        '--out', metrics, '--cfg-options', *data_options(roots[name]))
        result.update(test_log=test.stdout + test.stderr, metrics=json.loads(metrics.read_text()))
        return result

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run, name) for name in TINY}
        return {name: future.result() for name, future in futures.items()}


def check_metrics(metrics: dict) -> None:
    assert set(metrics) == {'aAcc', 'mIoU', 'mAcc'}  # IoUMetric's summary keys
    assert all(0 <= value <= 100 for value in metrics.values()), metrics


# ------------------------------------------------------------------ end to end: tools/train.py and tools/test.py
@pytest.mark.parametrize('name', sorted(TINY))
@pytest.mark.integration
def test_probe_training_keeps_backbone_frozen_and_trains_head(probe_runs, backbone_checkpoint, name):
    run = probe_runs[name]
    assert re.search(rf'Iter\(train\) \[{TRAIN_ITERS}/{TRAIN_ITERS}\]', run['train_log'])
    start = torch.load(backbone_checkpoint, weights_only=True)
    first = read(str(run['work'] / 'iter_1.pth')).raw['state_dict']
    last = read(str(run['work'] / f'iter_{TRAIN_ITERS}.pth')).raw['state_dict']

    backbone = {k[len('backbone.'):]: v for k, v in last.items() if k.startswith('backbone.')}
    assert backbone.keys() == start.keys()
    changed = [k for k, v in backbone.items() if not torch.equal(v, start[k])]
    assert not changed, f'frozen backbone weights changed in training: {changed}'

    head = ('decode_head.conv_seg.weight', 'decode_head.conv_seg.bias', 'decode_head.bn.weight', 'decode_head.bn.bias')
    assert set(head) <= set(last)
    unchanged = [k for k in head if torch.equal(first[k], last[k])]
    assert not unchanged, f'head parameters did not train between iterations 1 and {TRAIN_ITERS}: {unchanged}'
    assert not torch.equal(first['decode_head.bn.running_mean'], last['decode_head.bn.running_mean'])


@pytest.mark.integration
def test_test_tool_reports_iou_metrics_with_sliding_windows(probe_runs):
    run = probe_runs['cityscapes']
    assert 'Iter(val)' not in run['train_log']  # validation left to tools/test.py
    check_metrics(run['metrics'])
    log = run['test_log']
    assert 'Load checkpoint from' in log and 'per class results' in log
    used = Config.fromfile(run['work'] / 'test' / TINY['cityscapes'].name)  # the config the test runner dumped
    assert used.model.test_cfg == dict(mode='slide', crop_size=(32, 64), stride=(24, 48))
    for name in ('road', 'sidewalk', 'bicycle'):
        assert re.search(rf'\|\s*{name}\s*\|', log)


@pytest.mark.integration
def test_ade20k_validation_reports_iou_metrics(probe_runs):
    log = probe_runs['ade20k']['train_log']
    found = re.search(r'Iter\(val\) \[2/2\]\s+aAcc: ([\d.]+)\s+mIoU: ([\d.]+)\s+mAcc: ([\d.]+)', log)
    assert found, log[-3000:]
    check_metrics(dict(zip(('aAcc', 'mIoU', 'mAcc'), map(float, found.groups()))))
    assert re.search(r'\|\s*wall\s*\|', log)  # class 0 = ADE20K label 1 after reduce_zero_label
    check_metrics(probe_runs['ade20k']['metrics'])  # and tools/test.py on the saved checkpoint
    assert 'Load checkpoint from' in probe_runs['ade20k']['test_log']


@pytest.mark.parametrize('name', sorted(TINY))
def test_tiny_probe_predicts_with_sliding_windows(name, monkeypatch):
    """The tiny configs' slide settings read a scaled-down image as 3 x 3 overlapping windows of whole patches."""
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample

    import jetvit_mm.mm  # noqa: F401

    cfg = load(TINY[name])
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(cfg.model).eval()
    size = {'cityscapes': (64, 128), 'ade20k': (64, 64)}[name]
    crops = []
    encode_decode = model.encode_decode

    def record(inputs, metas):
        crops.append(tuple(inputs.shape[-2:]))
        return encode_decode(inputs, metas)

    monkeypatch.setattr(model, 'encode_decode', record)
    sample = SegDataSample(metainfo=dict(img_shape=size, ori_shape=size))
    with torch.no_grad():
        data = model.data_preprocessor(dict(inputs=[torch.randint(0, 255, (3, *size), dtype=torch.uint8)],
                                            data_samples=[sample]), training=False)
        out = model.predict(data['inputs'], data['data_samples'])
    assert crops == [tuple(cfg.model.test_cfg.crop_size)] * 9
    assert all(h % PATCH == 0 and w % PATCH == 0 for h, w in crops)
    assert out[0].pred_sem_seg.data.shape == (1, *size)


# ------------------------------------------------------------------ the real probe configs, as data
@pytest.mark.parametrize('name', sorted(PROBES))
def test_probe_config_protocol(name):
    cfg = load(PROBES[name])
    size, data = name.split('_')
    model = cfg.model
    assert model.type == 'EncoderDecoder'
    backbone = dict(model.backbone)
    assert backbone.pop('mixers') == default_mixers(W=dict(window_size=16))  # the model's letters, declared in full
    assert backbone == dict(type='JetViT', model_name=f'dinov3_vit{size[0]}16', arch=None, checkpoint=None,
                            out_indices=(-1, ), frozen=True)
    head = model.decode_head
    assert head.type == 'LinearProbeHead' and head.in_channels == {'base': 768, 'large': 1024}[size]
    assert head.dropout_ratio == 0.1 and head.loss_decode.type == 'mmseg.CrossEntropyLoss'
    assert head.num_classes == {'cityscapes': 19, 'ade20k': 150}[data]

    crop = {'cityscapes': (512, 1024), 'ade20k': (512, 512)}[data]
    if data == 'cityscapes':  # the whole 1024x2048 image: the resolution the search scores and the paper reports
        assert dict(model.test_cfg) == dict(mode='whole')
    else:
        assert tuple(model.test_cfg.crop_size) == crop and model.test_cfg.mode == 'slide'
        assert tuple(model.test_cfg.stride) == (341, 341)
    assert tuple(model.data_preprocessor.size) == crop and model.data_preprocessor.test_cfg == dict(size_divisor=16)
    assert all(s % PATCH == 0 for s in crop)
    assert tuple(pipeline_step(cfg.train_dataloader.dataset.pipeline, 'RandomCrop')['crop_size']) == crop
    steps = [step['type'] for step in cfg.train_dataloader.dataset.pipeline]  # DINOv3's order and settings
    assert steps[-3:] == ['RandomFlip', 'PhotoMetricDistortion', 'PackSegInputs']
    distortion = pipeline_step(cfg.train_dataloader.dataset.pipeline, 'PhotoMetricDistortion')
    assert (distortion['brightness_delta'], tuple(distortion['contrast_range']), tuple(distortion['saturation_range']),
            distortion['hue_delta']) == (32, (0.5, 1.5), (0.5, 1.5), 90)
    assert cfg.train_dataloader.batch_size == 2 and cfg.val_dataloader.batch_size == 1  # x 8 GPUs = 16
    assert cfg.test_dataloader == cfg.val_dataloader and cfg.test_evaluator.type == 'IoUMetric'

    # the paper's probe schedule by default
    assert cfg.optim_wrapper.optimizer == dict(type='Adam', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.0)
    assert cfg.train_cfg.max_iters == 5000 and cfg.default_scope == 'mmseg'


@pytest.mark.parametrize('name', sorted(PROBES))
def test_probe_config_label_conventions(name):
    from mmseg.datasets import ADE20KDataset, CityscapesDataset

    cfg = load(PROBES[name])
    data = name.split('_')[1]
    assert cfg.model.decode_head.ignore_index == IGNORE and cfg.model.data_preprocessor.seg_pad_val == IGNORE
    assert cfg.val_evaluator.get('ignore_index', IGNORE) == IGNORE
    for loader in (cfg.train_dataloader, cfg.val_dataloader, cfg.test_dataloader):
        dataset = loader.dataset
        assert dataset.get('ignore_index', IGNORE) == IGNORE
        load_annotations = pipeline_step(dataset.pipeline, 'LoadAnnotations')
        if data == 'ade20k':
            assert dataset.type == 'ADE20KDataset' and load_annotations.get('reduce_zero_label') is True
            assert dataset.get('reduce_zero_label', True) is True
            assert dataset.data_prefix.seg_map_path.startswith('annotations/')
        else:
            assert dataset.type == 'CityscapesDataset' and not load_annotations.get('reduce_zero_label')
            assert 'seg_map_suffix' not in dataset and 'metainfo' not in dataset  # the class defaults below
            assert dataset.data_prefix.seg_map_path.startswith('gtFine/')
    suffix = inspect.signature(CityscapesDataset.__init__).parameters['seg_map_suffix'].default
    assert suffix == '_gtFine_labelTrainIds.png'
    assert len(CityscapesDataset.METAINFO['classes']) == 19 and len(ADE20KDataset.METAINFO['classes']) == 150


@pytest.mark.parametrize('loader', ['train_dataloader', 'val_dataloader'])
def test_cityscapes_config_reads_train_ids_from_generated_data(tiny_cityscapes, loader):
    cfg = load(PROBES['base_cityscapes'])
    dataset_cfg = cfg[loader].dataset
    pipeline = dataset_cfg.pipeline
    if loader == 'train_dataloader':  # up to LoadAnnotations: the random steps after it would move pixels
        pipeline = [pipeline_step(pipeline, 'LoadImageFromFile'), pipeline_step(pipeline, 'LoadAnnotations')]
    dataset = build_dataset(dataset_cfg, tiny_cityscapes, pipeline)
    assert len(dataset) == {'train_dataloader': 4, 'val_dataloader': 2}[loader]
    assert len(dataset.metainfo['classes']) == 19
    assert dataset.metainfo['classes'][:3] == ('road', 'sidewalk', 'building')
    for index in range(len(dataset)):
        info = dataset.get_data_info(index)
        assert info['seg_map_path'].endswith('_gtFine_labelTrainIds.png')
        assert not info['reduce_zero_label']
        item = dataset[index]
        gt = item['gt_seg_map'] if 'gt_seg_map' in item else item['data_samples'].gt_sem_seg.data[0].numpy()
        np.testing.assert_array_equal(gt, png(info['seg_map_path']))  # train ids unchanged, ignore stays 255
        values = set(np.unique(gt).tolist())
        assert IGNORE in values and values <= set(range(19)) | {IGNORE}
        if loader == 'val_dataloader':
            assert item['inputs'].shape[-2:] == (1024, 2048)  # rescaled to the real images' size


@pytest.mark.parametrize('loader', ['train_dataloader', 'val_dataloader'])
def test_ade20k_config_reduces_zero_label_on_generated_data(tiny_ade20k, loader):
    cfg = load(PROBES['base_ade20k'])
    dataset_cfg = cfg[loader].dataset
    pipeline = dataset_cfg.pipeline
    if loader == 'train_dataloader':  # up to LoadAnnotations: the random steps after it would move pixels
        pipeline = [pipeline_step(pipeline, 'LoadImageFromFile'), pipeline_step(pipeline, 'LoadAnnotations')]
    dataset = build_dataset(dataset_cfg, tiny_ade20k, pipeline)
    assert len(dataset) == {'train_dataloader': 4, 'val_dataloader': 2}[loader]
    for index in range(len(dataset)):
        raw = png(dataset.get_data_info(index)['seg_map_path']).astype(np.int64)
        assert (raw == 0).any() and raw.max() <= 150
        item = dataset[index]
        gt = item['gt_seg_map'] if 'gt_seg_map' in item else item['data_samples'].gt_sem_seg.data[0].numpy()
        np.testing.assert_array_equal(gt, np.where(raw == 0, IGNORE, raw - 1))  # 0 -> 255, k -> k - 1


def test_ade20k_distillation_crops_are_all_image(tiny_ade20k):
    """Every distillation crop is a full 512x512 view of the image: a crop of a zoomed-out image would be padded to
    512x512 by the data preprocessor, and the padding tokens would be distilled (ADE20K evaluation never sees them)."""
    cfg = load(CONFIGS / 'jetvit' / 'dinov3_base_ade20k.py')
    dataset = build_dataset(cfg.train_dataloader.dataset, tiny_ade20k, cfg.train_dataloader.dataset.pipeline)
    shapes = {tuple(dataset[i % len(dataset)]['inputs'].shape[-2:]) for i in range(24)}
    assert shapes == {(512, 512)}


def test_probe_head_ignores_255():
    from mmengine.structures import PixelData
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample

    import jetvit_mm.mm  # noqa: F401

    cfg = load(PROBES['base_cityscapes'])
    with DefaultScope.overwrite_default_scope('mmseg'):
        head = MODELS.build(dict(cfg.model.decode_head, norm_cfg=dict(type='BN')))
    head.train()
    features = [torch.randn(2, head.in_channels, 2, 4)]

    def loss(labels: torch.Tensor) -> torch.Tensor:
        samples = [SegDataSample(gt_sem_seg=PixelData(data=label[None])) for label in labels]
        return head.loss(features, samples, train_cfg={})['loss_ce']

    ignored = loss(torch.full((2, 32, 64), IGNORE))
    assert ignored.item() == 0
    labels = torch.full((2, 32, 64), IGNORE)
    labels[:, :16] = 3
    assert loss(labels).item() > 0


@pytest.mark.parametrize('size', ['base', 'large'])
def test_documented_hybrid_switch(size):
    """The model base's example ``--cfg-options`` line gives a valid arch for the variant and sets the weights."""
    import argparse

    from mmengine.config import DictAction

    from jetvit_mm.models.mixers import validate_arch
    from jetvit_mm.models.variants import get_variant

    base = CONFIGS / '_base_' / 'models' / f'jetvit_dinov3_{size}_linear.py'
    line = next(line for line in base.read_text().splitlines() if 'model.backbone.arch=' in line)
    parser = argparse.ArgumentParser()
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    options = parser.parse_args(line.lstrip('# ').split()).cfg_options
    cfg = Config.fromfile(PROBES[f'{size}_cityscapes'])
    cfg.merge_from_dict(options)
    backbone = cfg.model.backbone
    validate_arch(backbone.arch, get_variant(backbone.model_name).depth)
    assert backbone.arch != 'F' * len(backbone.arch) and backbone.checkpoint.endswith('exported_hybrid.pth')
    assert backbone.frozen


# ------------------------------------------------------------------ schedules
def _lrs(schedule: Config, iters) -> list:
    """The learning rate at each of ``iters`` when the schedule's schedulers step once per iteration."""
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import PARAM_SCHEDULERS

    model = torch.nn.Linear(2, 2)
    optim_wrapper = build_optim_wrapper(model, schedule.optim_wrapper)
    schedulers = [PARAM_SCHEDULERS.build(dict(s, optimizer=optim_wrapper)) for s in schedule.param_scheduler]
    wanted, lrs = set(iters), {}
    for it in range(max(iters) + 1):
        if it in wanted:
            lrs[it] = optim_wrapper.get_lr()['lr'][0]
        for scheduler in schedulers:
            scheduler.step()
    return [lrs[it] for it in iters]


def test_paper_schedule_is_constant_adam():
    schedule = load(SCHEDULES['probe_paper_5k'])
    assert schedule.optim_wrapper.optimizer.type == 'Adam' and schedule.optim_wrapper.clip_grad is None
    assert schedule.train_cfg.max_iters == 5000
    assert _lrs(schedule, [0, 2500, 4999]) == [1e-4] * 3


def test_dinov3_schedule_warms_up_then_cosine():
    schedule = load(SCHEDULES['probe_dinov3_40k'])
    assert schedule.optim_wrapper.optimizer == dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), weight_decay=1e-3)
    assert schedule.optim_wrapper.get('clip_grad') is None and schedule.train_cfg.max_iters == 40000  # 'inf'
    start, mid_warmup, peak, mid, end = _lrs(schedule, [0, 750, 1500, 20750, 40000])
    assert start == pytest.approx(1e-9) and mid_warmup == pytest.approx(5e-4, rel=1e-3)
    assert peak == pytest.approx(1e-3)
    assert mid == pytest.approx(1e-3 / 2, rel=1e-3)  # half way down the cosine
    assert end == pytest.approx(0., abs=1e-10)  # final_div_factor .inf (the last step is 1.7e-12)


@pytest.mark.parametrize('name', ['base_ade20k', 'large_cityscapes'])
def test_schedule_swap_documented_in_probe_configs(name, tmp_path):
    """Replacing the last ``_base_`` entry by probe_dinov3_40k.py switches the schedule and nothing else."""
    text = PROBES[name].read_text()
    assert "'../_base_/schedules/probe_paper_5k.py'" in text and 'probe_dinov3_40k.py' in text
    swapped = tmp_path / PROBES[name].name
    swapped.write_text(text.replace('probe_paper_5k.py', 'probe_dinov3_40k.py')
                       .replace("'../_base_/", f"'{CONFIGS / '_base_'}/"))
    original, dinov3 = load(PROBES[name]).to_dict(), Config.fromfile(swapped).to_dict()
    schedule = load(SCHEDULES['probe_dinov3_40k']).to_dict()
    for key, value in schedule.items():
        assert dinov3[key] == value
    differing = {k for k in original.keys() | dinov3.keys() if original.get(k) != dinov3.get(k)}
    assert differing == {'optim_wrapper', 'param_scheduler', 'train_cfg', 'default_hooks'}


def test_real_slide_windows_are_whole_patches():
    """The real configs' windows on full-size inputs: whole patches on padded ADE20K images; Cityscapes' documented
    sliding alternative gives 3 x 3 windows."""
    from mmengine.config import ConfigDict
    from mmseg.models.segmentors import EncoderDecoder

    class Windows:
        out_channels = 1

        def __init__(self, test_cfg):
            self.test_cfg, self.crops = test_cfg, []

        def encode_decode(self, inputs, metas):
            self.crops.append(tuple(inputs.shape[-2:]))
            return inputs.new_zeros(inputs.shape[0], 1, *inputs.shape[-2:])

    def windows(name, size, **test_cfg):
        stub = Windows(ConfigDict(dict(load(PROBES[name]).model.test_cfg, **test_cfg)))
        EncoderDecoder.slide_inference(stub, torch.zeros(1, 1, *size), [dict()])
        return stub.crops

    # the --cfg-options the Cityscapes config gives for sliding windows
    sliding = dict(mode='slide', crop_size=(512, 1024), stride=(341, 682))
    assert windows('large_cityscapes', (1024, 2048), **sliding) == [(512, 1024)] * 9
    # ADE20K: short side 512 after the test Resize, long side padded to whole patches
    for size in ((512, 688), (512, 2048), (512, 512), (400, 2048), (704, 512)):
        crops = windows('base_ade20k', size)
        assert all(h % PATCH == 0 and w % PATCH == 0 for h, w in crops), (size, crops)
