"""Detection: the tiny Mask R-CNN trains and reports COCO box/mask mAP through the tools, the simple feature
pyramid's strides, layer-wise lr decay, and the real COCO configs (teacher and hybrid) running a loss step."""
import json
import math
import re
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import DefaultScope
from mmengine.utils import import_modules_from_strings
from torch import nn

import jetvit_mm.mm  # noqa: F401  (registers the types the configs name)
from jetvit_mm.models.checkpoint import read
from jetvit_mm.models.jetvit import JetViT
from jetvit_mm.models.necks import SimpleFeaturePyramid
from jetvit_mm.models.supernet import JetViTSupernet

from .conftest import REPO, run_tool

TINY = REPO / 'tests/configs/det_mask_rcnn_tiny_coco.py'
REAL = {'teacher': REPO / 'configs/det/mask_rcnn_jetvit_dinov3_base_coco.py',
        'hybrid': REPO / 'configs/det/mask_rcnn_jetvit_dinov3_base_hybrid_coco.py'}
REAL_ARCH = {'teacher': 'F' * 12, 'hybrid': 'LLWLFWLLWLFL'}
TRAIN_ITERS = 2
TINY_DEPTH = 4
LR, WD, DECAY = 1e-3, 0.1, 0.7
_tiny = dict(model_name='dinov3_vits16', embed_dim=32, num_heads=2)


def layer_decay_cfg(lr: float = LR, **paramwise) -> dict:
    return dict(type='OptimWrapper', constructor='LayerDecayOptimWrapperConstructor',
                paramwise_cfg=dict(layer_decay_rate=DECAY, **paramwise),
                optimizer=dict(type='AdamW', lr=lr, weight_decay=WD))


def lr_and_wd(optim_wrapper) -> dict:
    """``{parameter name: (lr, weight_decay)}`` read from the optimizer's param groups."""
    out = {}
    for group in optim_wrapper.optimizer.param_groups:
        assert len(group['param_names']) == len(group['params'])
        for name in group['param_names']:
            assert name not in out, f'{name} in two param groups'
            out[name] = (group['lr'], group['weight_decay'])
    return out


def build_mmdet(cfg: Config) -> nn.Module:
    import_modules_from_strings(**cfg.custom_imports)
    from mmdet.registry import MODELS

    with DefaultScope.overwrite_default_scope('mmdet'):
        model = MODELS.build(cfg.model)
    model.init_weights()
    return model


# ------------------------------------------------------------------ 1. tools/train.py + tools/test.py, COCO metrics
@pytest.fixture(scope='module')
def tiny_coco(tmp_path_factory) -> Path:
    from .fixtures.datasets import make_coco

    return make_coco(tmp_path_factory.mktemp('coco'), splits={'train2017': 2, 'val2017': 2}, size=(64, 96), seed=0)


def data_options(root: Path) -> list:
    ann = root / 'annotations' / 'instances_val2017.json'
    return ([f'{split}_dataloader.dataset.data_root={root}/' for split in ('train', 'val', 'test')]
            + [f'val_evaluator.ann_file={ann}', f'test_evaluator.ann_file={ann}'])


@pytest.fixture(scope='module')
def tiny_run(tiny_coco, tmp_path_factory) -> dict:
    """Train the tiny detector with layer decay for a few iterations, then evaluate its checkpoint."""
    work = tmp_path_factory.mktemp('det_tiny')
    train = run_tool('train.py', TINY, '--work-dir', work, '--cfg-options', *data_options(tiny_coco),
                     f'train_cfg.max_iters={TRAIN_ITERS}', 'train_cfg.val_begin=1000',  # tools/test.py evaluates
                     'optim_wrapper.constructor=LayerDecayOptimWrapperConstructor',
                     f'optim_wrapper.paramwise_cfg.layer_decay_rate={DECAY}')
    checkpoint = work / f'iter_{TRAIN_ITERS}.pth'
    metrics = work / 'metrics.json'
    test = run_tool('test.py', TINY, checkpoint, '--work-dir', work / 'test', '--out', metrics,
                    '--cfg-options', *data_options(tiny_coco), f'test_evaluator.outfile_prefix={work}/results')
    return dict(work=work, checkpoint=checkpoint, train_log=train.stdout + train.stderr,
                test_log=test.stdout + test.stderr, metrics=json.loads(metrics.read_text()))


@pytest.mark.integration
def test_tiny_detector_trains_with_layer_decay(tiny_run):
    assert re.search(rf'Iter\(train\) \[{TRAIN_ITERS}/{TRAIN_ITERS}\]', tiny_run['train_log'])
    assert 'loss_mask' in tiny_run['train_log']
    groups = read(str(tiny_run['checkpoint'])).raw['optimizer']['param_groups']
    lrs = sorted({group['lr'] for group in groups}, reverse=True)  # ConstantLR(1.0): the constructor's lrs
    assert lrs == pytest.approx([1e-4 * DECAY ** k for k in range(TINY_DEPTH + 2)])
    assert groups[0]['lr'] == pytest.approx(1e-4)  # the lr mmengine logs is the heads' one


@pytest.mark.integration
def test_tiny_detector_reports_coco_box_and_mask_map(tiny_run):
    metrics, log = tiny_run['metrics'], tiny_run['test_log']
    for task in ('bbox', 'segm'):
        for stat in ('mAP', 'mAP_50', 'mAP_75'):  # an untrained model: ~0, but a number COCOeval computed
            assert 0 <= metrics[f'coco/{task}_{stat}'] <= 1, metrics
        for stat in ('mAP_s', 'mAP_m', 'mAP_l'):  # -1: no ground truth of that size in the 2 images
            assert -1 <= metrics[f'coco/{task}_{stat}'] <= 1, metrics
        assert f'Evaluating {task}...' in log
        assert f'{task}_mAP_copypaste' in log
    assert log.count('Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ]') == 2


@pytest.mark.integration
def test_tiny_detector_evaluates_real_predictions(tiny_run, tiny_coco):
    """The mAPs above were computed on detections with boxes and RLE masks for the val images."""
    val_ids = {image['id'] for image in json.loads((tiny_coco / 'annotations/instances_val2017.json').read_text())[
        'images']}
    boxes = json.loads((tiny_run['work'] / 'results.bbox.json').read_text())
    masks = json.loads((tiny_run['work'] / 'results.segm.json').read_text())
    assert boxes and len(boxes) == len(masks)
    assert {det['image_id'] for det in boxes} == val_ids
    assert all(len(det['bbox']) == 4 and 0 <= det['score'] <= 1 for det in boxes)
    assert all({'size', 'counts'} <= set(det['segmentation']) for det in masks)


@pytest.mark.integration
def test_search_scores_archs_with_the_detectors_coco_metric(tiny_run, tiny_coco, tiny_cityscapes, tmp_path):
    """tools/search.py on a Mask R-CNN config: the teacher's trained neck + RPN + RoI heads score each arch with
    mmdet's CocoMetric (a segmentation-only scorer could not load them)."""
    from .test_supernet import make_teacher_checkpoint
    teacher = make_teacher_checkpoint(tmp_path / 'teacher.pth')
    run_tool('train.py', REPO / 'tests/configs/distill_supernet_tiny_cityscapes.py', '--work-dir', tmp_path / 'step1',
             '--cfg-options', f'train_dataloader.dataset.data_root={tiny_cityscapes}',
             f'model.teacher.checkpoint={teacher}', 'train_cfg.max_iters=2', 'default_hooks.checkpoint.interval=2')
    work = tmp_path / 'search'
    run_tool('search.py', TINY, tmp_path / 'step1' / 'iter_2.pth', '--metric', 'coco/bbox_mAP', '--head-checkpoint',
             tiny_run['checkpoint'], '--beam-width', '1', '--min-gain', '100', '--work-dir', work,
             '--cfg-options', *data_options(tiny_coco))
    stage = json.loads((work / 'search_state.json').read_text())['stages']['1']
    assert len(stage['scores']) == 1 + TINY_DEPTH  # all-L and its one-W moves, then the plateau stops it
    assert all(0 <= v <= 1 for v in stage['scores'].values()) and 0 <= stage['teacher_score'] <= 1
    with pytest.raises(AssertionError, match='does not fit the downstream model'):
        run_tool('search.py', TINY, tmp_path / 'step1' / 'iter_2.pth', '--metric', 'coco/bbox_mAP',
                 '--head-checkpoint', tmp_path / 'step1' / 'iter_2.pth', '--work-dir', tmp_path / 'bad',
                 '--cfg-options', *data_options(tiny_coco))


# ------------------------------------------------------------------ 2. simple feature pyramid: strides and channels
def pyramid_sizes(height: int, width: int, patch: int = 16) -> list:
    """The rule SimpleFeaturePyramid implements, as ViTDet: deconvs x4 / x2, identity, a 2x2 max-pool (floor) for
    stride 32 and a stride-2 1x1 max-pool (ceil) of that for the extra level."""
    h, w = height // patch, width // patch
    p5 = (h // 2, w // 2)
    return [(4 * h, 4 * w), (2 * h, 2 * w), (h, w), p5, (math.ceil(p5[0] / 2), math.ceil(p5[1] / 2))]


@pytest.mark.parametrize('size', [(64, 96), (32, 32), (48, 80), (80, 144), (112, 48), (128, 64)],
                         ids=lambda s: f'{s[0]}x{s[1]}')
def test_simple_feature_pyramid_strides_and_channels(size):
    backbone = JetViT(**_tiny, depth=1)
    neck = SimpleFeaturePyramid(in_channels=32, out_channels=24, num_outs=5)
    with torch.no_grad():
        feats = neck(backbone(torch.randn(1, 3, *size)))
    assert [tuple(f.shape[-2:]) for f in feats] == pyramid_sizes(*size)
    assert all(f.shape[:2] == (1, 24) for f in feats)
    if size[0] % 32 == 0 and size[1] % 32 == 0:  # mmdet pads to 32: levels are size / stride, the extra one ceil
        assert [tuple(f.shape[-2:]) for f in feats] == [(size[0] // s, size[1] // s) for s in (4, 8, 16, 32)] + [
            (math.ceil(size[0] / 64), math.ceil(size[1] / 64))]


# ------------------------------------------------------------------ 3. layer-wise lr decay
class TinyDetector(nn.Module):
    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.neck = SimpleFeaturePyramid(in_channels=32, out_channels=16, num_outs=4)
        self.head = nn.Conv2d(16, 3, 1)


def expected(layer: int, decay: bool, depth: int = TINY_DEPTH) -> tuple:
    """The documented rule: lr = base_lr * d ** (num_layers + 1 - layer_id); no decay -> weight_decay 0."""
    return pytest.approx(LR * DECAY ** (depth + 1 - layer)), WD if decay else 0.


def test_layer_decay_lr_and_weight_decay_per_parameter():
    model = TinyDetector(JetViT(**_tiny, arch='LWFF', depth=TINY_DEPTH))
    got = lr_and_wd(build_optim_wrapper(model, layer_decay_cfg()))
    named = dict(model.named_parameters())
    assert set(got) == set(named)
    top = TINY_DEPTH + 1
    table = {  # name: (layer id, weight decay?)
        'backbone.patch_embed.proj.weight': (0, True), 'backbone.patch_embed.proj.bias': (0, False),
        'backbone.cls_token': (0, False), 'backbone.reg_token': (0, False),
        'backbone.blocks.0.norm1.weight': (1, False), 'backbone.blocks.0.attn.qkv.weight': (1, True),
        'backbone.blocks.0.attn.conv.fc1.weight': (1, True), 'backbone.blocks.0.attn.conv.fc2.bias': (1, False),
        'backbone.blocks.1.ls1.gamma': (2, False), 'backbone.blocks.2.attn.proj.weight': (3, True),
        'backbone.blocks.3.mlp.fc2.weight': (4, True), 'backbone.blocks.3.mlp.fc2.bias': (4, False),
        'backbone.blocks.3.ls2.gamma': (4, False),
        'backbone.norm.weight': (top, False), 'backbone.norm.bias': (top, False),
        'neck.stages.0.0.0.weight': (top, True), 'neck.stages.3.2.weight': (top, False),
        'head.weight': (top, True), 'head.bias': (top, False),
    }
    for name, (layer, decay) in table.items():
        assert got[name] == expected(layer, decay), name
    for name, param in named.items():  # every parameter follows the rule
        m = re.match(r'backbone\.blocks\.(\d+)\.', name)
        layer = (int(m.group(1)) + 1 if m else 0 if re.match(r'backbone\.(patch_embed|cls_token|reg_token)', name)
                 else top)
        decay = param.ndim > 1 and not name.endswith(('_token', 'pos_embed'))
        assert got[name] == expected(layer, decay), name


def test_layer_decay_on_supernet_candidates_and_dinov2_pos_embed():
    supernet = TinyDetector(JetViTSupernet(search_space='LWF', **_tiny, depth=TINY_DEPTH))
    got = lr_and_wd(build_optim_wrapper(supernet, layer_decay_cfg()))
    for letter in 'LWF':
        assert got[f'backbone.blocks.3.attn.candidates.{letter}.qkv.weight'] == expected(4, True)
        assert got[f'backbone.blocks.0.attn.candidates.{letter}.proj.bias'] == expected(1, False)
    dinov2 = JetViT(model_name='dinov2_vits14', embed_dim=32, depth=2, num_heads=2)
    got = lr_and_wd(build_optim_wrapper(dinov2, layer_decay_cfg()))  # the backbone alone: names without prefix
    assert got['pos_embed'] == expected(0, False, depth=2)
    assert got['blocks.1.mlp.fc1.weight'] == expected(2, True, depth=2)
    assert got['norm.weight'] == expected(3, False, depth=2)


def test_layer_decay_in_the_tiny_mask_rcnn_trains_a_step():
    model = build_mmdet(Config.fromfile(TINY))
    model.backbone.patch_embed.requires_grad_(False)
    wrapper = build_optim_wrapper(model, layer_decay_cfg(num_layers=TINY_DEPTH))
    got = lr_and_wd(wrapper)
    assert not any(name.startswith('backbone.patch_embed') for name in got)  # frozen: left out
    assert got['backbone.blocks.3.mlp.fc1.weight'] == expected(4, True)
    assert got['roi_head.bbox_head.fc_cls.weight'] == expected(TINY_DEPTH + 1, True)
    assert got['rpn_head.rpn_conv.bias'] == expected(TINY_DEPTH + 1, False)
    assert wrapper.optimizer.param_groups[0]['lr'] == pytest.approx(LR)
    before = model.backbone.blocks[0].attn.qkv.weight.detach().clone()
    model.backbone.blocks[0].attn.qkv.weight.sum().backward()
    wrapper.step()
    assert not torch.equal(before, model.backbone.blocks[0].attn.qkv.weight)


@pytest.mark.parametrize('paramwise, error', [
    (dict(layer_decay_rate=0.7, num_layers=12), 'num_layers=12'),
    (dict(layer_decay_rate=0.7, decay_type='layer_wise'), 'decay_type'),
    (dict(num_layers=4), 'layer_decay_rate is required'),
    (dict(layer_decay_rate=1.5), r'in \(0, 1\]'),
])
def test_layer_decay_rejects_bad_paramwise_cfg(paramwise, error):
    cfg = dict(layer_decay_cfg(), paramwise_cfg=paramwise)
    with pytest.raises(ValueError, match=error):
        build_optim_wrapper(TinyDetector(JetViT(**_tiny, depth=TINY_DEPTH)), cfg)


def test_layer_decay_needs_a_vit_backbone():
    with pytest.raises(TypeError, match='blocks'):
        build_optim_wrapper(nn.Sequential(nn.Linear(2, 2)), layer_decay_cfg())


# ------------------------------------------------------------------ 4. the real COCO configs
@pytest.mark.parametrize('name', sorted(REAL))
def test_real_config_recipe(name):
    cfg = Config.fromfile(REAL[name])
    assert cfg.default_scope == 'mmdet'
    backbone = cfg.model.backbone
    assert (backbone.type, backbone.model_name, backbone.arch) == ('JetViT', 'dinov3_vitb16', REAL_ARCH[name])
    assert (backbone.mixers.W.window_size, backbone.drop_path_rate) == (16, 0.1)
    assert (cfg.model.neck.type, cfg.model.neck.out_channels, cfg.model.neck.num_outs) == ('SimpleFeaturePyramid',
                                                                                           256, 5)
    steps = {step['type']: step for step in cfg.train_dataloader.dataset.pipeline}
    assert steps['RandomResize']['scale'] == (1024, 1024) and steps['RandomResize']['ratio_range'] == (0.1, 2.0)
    assert steps['RandomCrop']['crop_size'] == (1024, 1024)
    assert cfg.model.data_preprocessor.batch_augments == [dict(type='BatchFixedSizePad', size=(1024, 1024),
                                                               pad_mask=True)]
    assert cfg.optim_wrapper.optimizer == dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.1)
    assert cfg.optim_wrapper.paramwise_cfg == dict(layer_decay_rate=0.7)
    assert cfg.val_evaluator.type == 'CocoMetric' and cfg.val_evaluator.metric == ['bbox', 'segm']


def test_real_config_lsj_pipeline_pads_to_1024(tiny_coco):
    """The teacher config's large-scale-jitter pipeline and fixed-size padding on generated COCO images."""
    from mmdet.registry import DATASETS, MODELS
    from mmengine.dataset import pseudo_collate

    cfg = Config.fromfile(REAL['teacher'])
    with DefaultScope.overwrite_default_scope('mmdet'):
        dataset = DATASETS.build(dict(cfg.train_dataloader.dataset, data_root=f'{tiny_coco}/'))
        preprocessor = MODELS.build(cfg.model.data_preprocessor)
    items = [dataset[i] for i in range(len(dataset))]
    assert all(max(item['inputs'].shape[-2:]) <= 1024 for item in items)
    batch = preprocessor(pseudo_collate(items), training=True)
    assert batch['inputs'].shape[-2:] == (1024, 1024)
    for sample in batch['data_samples']:
        assert sample.gt_instances.masks.masks.shape[-2:] == (1024, 1024)


def test_real_config_test_pipeline_pads_to_the_training_canvas(tiny_coco):
    """Evaluation sees the 1024x1024 canvas (64x64 patches) training saw: DINOv3's RoPE spreads its coordinates over
    the whole grid, so a smaller test grid would move every patch. The padding is the mean colour, 0 once
    normalised, as training's batch padding."""
    from mmdet.registry import DATASETS, MODELS
    from mmengine.dataset import pseudo_collate

    cfg = Config.fromfile(REAL['teacher'])
    with DefaultScope.overwrite_default_scope('mmdet'):
        dataset = DATASETS.build(dict(cfg.val_dataloader.dataset, data_root=f'{tiny_coco}/'))
        preprocessor = MODELS.build(cfg.model.data_preprocessor)
    items = [dataset[i] for i in range(len(dataset))]
    batch = preprocessor(pseudo_collate(items), training=False)
    assert batch['inputs'].shape[-2:] == (1024, 1024)
    for item, image in zip(items, batch['inputs']):
        h, w = item['data_samples'].ori_shape
        scale = 1024 / max(h, w)
        content_h, content_w = round(h * scale), round(w * scale)
        padding = torch.ones(1024, 1024, dtype=torch.bool)
        padding[:content_h, :content_w] = False
        assert padding.sum() > 1024 * 100  # a non-square image: there is padding to check
        assert image[:, padding].abs().max() < 0.01
        assert image[:, :content_h, :content_w].abs().max() > 0.1  # the image itself


@pytest.mark.parametrize('name', sorted(REAL))
def test_real_config_runs_a_loss_step(name):
    """The real config with a small backbone (width 32, all 12 layers, the config's arch) and a 128x128 fixed pad."""
    from mmdet.testing import demo_mm_inputs

    cfg = Config.fromfile(REAL[name])
    cfg.merge_from_dict({'model.backbone.embed_dim': 32, 'model.backbone.num_heads': 2,
                         'model.neck.in_channels': 32,
                         'model.data_preprocessor.batch_augments': [
                             dict(type='BatchFixedSizePad', size=(128, 128), pad_mask=True)]})
    model = build_mmdet(cfg)
    assert model.backbone.arch == REAL_ARCH[name] and model.backbone.depth == 12
    assert model.backbone.blocks[-1].drop_path1.drop_prob == pytest.approx(0.1)
    assert all(block.attn.window_size == 16 for letter, block in zip(model.backbone.arch, model.backbone.blocks)
               if letter == 'W')
    packed = demo_mm_inputs(batch_size=2, image_shapes=(3, 96, 112), num_items=[2, 1], num_classes=80,
                            with_mask=True)
    data = model.data_preprocessor(packed, training=True)
    assert data['inputs'].shape[-2:] == (128, 128)
    losses = model(**data, mode='loss')
    assert {'loss_rpn_cls', 'loss_rpn_bbox', 'loss_cls', 'loss_bbox', 'loss_mask'} <= set(losses)
    total, _ = model.parse_losses(losses)
    assert torch.isfinite(total)
    with DefaultScope.overwrite_default_scope('mmdet'):
        got = lr_and_wd(build_optim_wrapper(model, cfg.optim_wrapper))
    assert got['backbone.blocks.11.mlp.fc1.weight'] == (pytest.approx(1e-4 * 0.7), 0.1)
    assert got['backbone.patch_embed.proj.weight'] == (pytest.approx(1e-4 * 0.7 ** 13), 0.1)
    assert got['roi_head.mask_head.conv_logits.weight'] == (pytest.approx(1e-4), 0.1)
