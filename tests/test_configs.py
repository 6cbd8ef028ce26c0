"""Every config under configs/ loads and builds its model; JetViT runs inside mmseg and mmdet models."""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmengine.utils import import_modules_from_strings

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted(p for p in (REPO / 'configs').rglob('*.py') if '_base_' not in p.parts)


def build_model(path: Path):
    cfg = Config.fromfile(path)
    import_modules_from_strings(**cfg.get('custom_imports', dict(imports=[])))
    scope = cfg.get('default_scope', 'mmseg')
    with DefaultScope.overwrite_default_scope(scope):
        if scope == 'mmdet':
            from mmdet.registry import MODELS
        else:
            from mmseg.registry import MODELS
        model = MODELS.build(cfg.model)
    model.init_weights()
    return cfg, model


def test_configs_found():
    assert len(CONFIGS) >= 2, CONFIGS


@pytest.mark.parametrize('path', CONFIGS, ids=[str(p.relative_to(REPO / 'configs')) for p in CONFIGS])
def test_config_builds(path):
    cfg, model = build_model(path)
    backbone = model.student if type(model).__name__ == 'FeatureDistiller' else model.backbone
    assert type(backbone).__name__ in ('JetViT', 'JetViTSupernet')
    assert len(backbone.arch) == backbone.depth


def test_jetvit_in_mmseg_encoder_decoder():
    cfg, model = build_model(REPO / 'configs/tiny/seg_linear_probe_tiny_cityscapes.py')
    model.eval()
    with torch.no_grad():
        logits = model(torch.randn(2, 3, 48, 80), mode='tensor')  # 3x5 grid: not a multiple of the window
    assert logits.shape == (2, 19, 3, 5)
    assert all(not p.requires_grad for p in model.backbone.parameters())


def test_jetvit_in_mmdet_mask_rcnn():
    from mmdet.testing import demo_mm_inputs

    cfg, model = build_model(REPO / 'configs/tiny/det_mask_rcnn_tiny_coco.py')
    packed = demo_mm_inputs(batch_size=2, image_shapes=(3, 64, 96), num_items=[2, 1], num_classes=80,
                            with_mask=True)
    data = model.data_preprocessor(packed, training=True)
    losses = model(**data, mode='loss')
    assert {'loss_rpn_cls', 'loss_cls', 'loss_bbox', 'loss_mask'} <= set(losses)
    total, _ = model.parse_losses(losses)
    total.backward()
    assert model.backbone.blocks[0].attn.qkv.weight.grad is not None
    feats = model.extract_feat(data['inputs'])
    assert [f.shape[-2:] for f in feats] == [(16, 24), (8, 12), (4, 6), (2, 3), (1, 2)]
    model.eval()
    with torch.no_grad():
        results = model(**model.data_preprocessor(packed, training=False), mode='predict')
    assert len(results) == 2 and results[0].pred_instances.bboxes.shape[-1] == 4
