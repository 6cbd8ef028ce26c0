"""The fine-tuning config that the export writes keeps what the distillation config trained with (issue #32 item 3):
the 7B config's FSDP2 wrapper (bf16 parameters, sharded checkpoints) and the student's ``grad_checkpointing``, and it
builds and steps under that wrapper on a 2-process gloo group at tiny size; a base-size config keeps DDP."""
import json
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from jetvit_mm.mm.apis.export import export_hybrid
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.supernet import JetViTSupernet

from .test_fsdp import torchrun

REPO = Path(__file__).resolve().parents[1]
TINY = dict(embed_dim=32, depth=2, num_heads=2)
DISTILL_7B = REPO / 'configs' / 'jetvit' / 'dinov3_7b_cityscapes.py'


def export_7b(out: Path) -> Path:
    torch.manual_seed(0)
    supernet = JetViTSupernet(search_space='LWF', model_name='dinov3_vit7b16',
                              mixers=default_mixers(W=dict(window_size=4)), **TINY)
    return export_hybrid(supernet, 'WL', out, distill_config=str(DISTILL_7B))['finetune_config']


def test_7b_finetune_config_keeps_fsdp2_and_checkpointing(tmp_path):
    cfg = Config.fromfile(export_7b(tmp_path))
    assert cfg.model_wrapper_cfg.to_dict() == Config.fromfile(DISTILL_7B).model_wrapper_cfg.to_dict()
    assert cfg.model_wrapper_cfg.type == 'FSDP2Wrapper' and 'find_unused_parameters' not in cfg.model_wrapper_cfg
    assert cfg.model.student.grad_checkpointing is True and cfg.model.student.arch == 'WL'


def test_base_finetune_config_keeps_ddp(tmp_path):
    supernet = JetViTSupernet(search_space='LWF', model_name='dinov3_vitb16',
                              mixers=default_mixers(W=dict(window_size=4)), **TINY)
    base = REPO / 'configs' / 'jetvit' / 'dinov3_base_cityscapes.py'
    cfg = Config.fromfile(export_hybrid(supernet, 'WL', tmp_path, distill_config=str(base))['finetune_config'])
    assert cfg.model_wrapper_cfg.to_dict() == dict(type='MMDistributedDataParallel', find_unused_parameters=False)
    assert 'grad_checkpointing' not in cfg.model.student


@pytest.mark.filterwarnings('ignore:FeatureDistiller')
@pytest.mark.integration
def test_7b_finetune_config_wraps_and_steps_on_two_ranks(tmp_path):
    config = export_7b(tmp_path)
    torchrun(str(REPO / 'tests' / 'finetune_fsdp_worker.py'), str(config), str(tmp_path), json.dumps(TINY))
    result = json.loads((tmp_path / 'result.json').read_text())
    assert result['wrapper'] == 'FSDP2Wrapper' and result['world'] == 2
    assert result['units'] == 2 * TINY['depth'] + 1 and result['checkpointing'] and result['arch'] == 'WL'
    assert result['loss'] > 0
