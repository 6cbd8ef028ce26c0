"""The FSDP2 configs of the largest teachers at real size, on the meta device (nothing allocated): parameter counts,
what trains, and the sharding plan (one FSDP2 unit per transformer block of student and teacher, the rest in the
root unit), with the per-GPU share of the weights on 8 GPUs."""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

import jetvit_mm.mm  # noqa: F401
from jetvit_mm.distill.fsdp2 import shard_units
from jetvit_mm.mm.registry import MODELS

REPO = Path(__file__).resolve().parents[1]
# config -> (teacher variant's parameters, depth)
CASES = {'jetvit/dinov3_7b_cityscapes.py': (6.716e9, 40), 'jetvit/dinov3_7b_cityscapes_step2.py': (6.716e9, 40),
         'depth/depthanything_giant_distill.py': (1.136e9, 40)}


@pytest.mark.filterwarnings('ignore:FeatureDistiller')
@pytest.mark.parametrize('config', list(CASES))
def test_real_size_model_and_sharding_plan_on_meta(config):
    cfg = Config.fromfile(REPO / 'configs' / config)
    assert cfg.model_wrapper_cfg.type == 'FSDP2Wrapper' and cfg.model_wrapper_cfg.param_dtype == 'bfloat16'
    assert cfg.model_wrapper_cfg.reduce_dtype == 'float32' and cfg.model.student.grad_checkpointing
    with DefaultScope.overwrite_default_scope('mmseg'), torch.device('meta'):
        model = MODELS.build(cfg.model)
    teacher_params, depth = CASES[config]
    assert all(p.is_meta for p in model.parameters())
    teacher = sum(p.numel() for p in model.teacher.parameters())
    assert abs(teacher - teacher_params) < 0.002 * teacher_params
    assert not any(p.requires_grad for p in model.teacher.parameters())
    assert model.student.grad_checkpointing and model.student.depth == depth
    trainable = sum(p.numel() for p in model.student.parameters() if p.requires_grad)
    assert trainable > teacher  # each layer holds two candidates' q/k/v/o
    units = shard_units(model)
    assert len(units) == 2 * depth and units[0] is model.teacher.blocks[0] and units[depth] is model.student.blocks[0]
    in_units = sum(p.numel() for unit in units for p in unit.parameters())
    total = sum(p.numel() for p in model.parameters())
    assert in_units / total > 0.99  # the root unit (embeddings, tokens, norms) is small
    # the largest unit all-gathered at a time, in bf16: well below one GPU
    assert max(sum(p.numel() for p in unit.parameters()) for unit in units) * 2 < 2 ** 30


def test_7b_probe_config_on_meta():
    """The 7B search's scoring config at real size, on the meta device: the frozen 7B teacher (40 layers, width 4096)
    feeding its 4096 channels to the linear head, which alone trains."""
    cfg = Config.fromfile(REPO / 'configs' / 'probe' / 'dinov3_7b_linear_cityscapes.py')
    with DefaultScope.overwrite_default_scope('mmseg'), torch.device('meta'):
        from mmseg.registry import MODELS as SEG_MODELS
        model = SEG_MODELS.build(cfg.model)
    backbone = model.backbone
    assert all(p.is_meta for p in model.parameters())
    assert backbone.depth == 40 and backbone.arch == 'F' * 40 and backbone.frozen
    assert abs(sum(p.numel() for p in backbone.parameters()) - 6.716e9) < 0.002 * 6.716e9
    assert not any(p.requires_grad for p in backbone.parameters())
    assert model.decode_head.in_channels == backbone.embed_dim == 4096 and model.decode_head.num_classes == 19
    assert cfg.crop_size == (512, 1024) and cfg.model.test_cfg.mode == 'whole'
