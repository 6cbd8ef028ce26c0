"""Every shipped config (configs/) and test config (tests/configs/) loads and builds its model; the shipped ones are
flat (at most two levels of bases, no experiment inherited, the runtime and the input normalisation in one base each);
JetViT runs inside mmseg and mmdet models."""
from collections import Counter
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmengine.utils import import_modules_from_strings

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / 'configs'
CONFIGS = sorted(p for p in SHIPPED.rglob('*.py') if '_base_' not in p.parts)
TEST_CONFIGS = sorted(p for p in (REPO / 'tests' / 'configs').glob('*.py') if not p.name.startswith('registry_'))
# the experiment configs a user runs, per folder (the demo's task, depth, detection, segmentation distillation, probes)
EXPECTED = {'demo': 5, 'depth': 9, 'det': 2, 'jetvit': 10, 'probe': 5}
# the FSDP2 configs of the largest teachers: two 6.7B (1.1B) models do not fit this machine; built on the meta device
META_ONLY = {'jetvit/dinov3_7b_cityscapes.py', 'jetvit/dinov3_7b_cityscapes_step2.py',
             'depth/depthanything_giant_distill.py', 'probe/dinov3_7b_linear_cityscapes.py'}
FULL_SIZE = [p for p in CONFIGS if p.relative_to(SHIPPED).as_posix() not in META_ONLY]
RUNTIME_BASES = {SHIPPED / '_base_' / 'default_runtime.py', SHIPPED / '_base_' / 'det_runtime.py'}


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


def test_shipped_configs_are_exactly_these():
    assert Counter(p.parent.relative_to(SHIPPED).as_posix() for p in CONFIGS) == EXPECTED
    assert len(CONFIGS) == 31


def bases(path: Path) -> list:
    """``path``'s ``_base_`` entries: a package's (``mmseg::...``, ``mmdet::...``) as text, ours as resolved paths."""
    return [b if '::' in b else (path.parent / b).resolve() for b in Config._get_base_files(str(path))]


def levels(path: Path) -> int:
    """How deep the inheritance below ``path`` goes: 0 without bases; a package's base counts as one level."""
    return max((1 if isinstance(b, str) else 1 + levels(b) for b in bases(path)), default=0)


def own_bases(path: Path) -> set:
    """Every file of this repository ``path`` inherits from, at any depth."""
    found = set()
    for b in bases(path):
        if not isinstance(b, str):
            found |= {b} | own_bases(b)
    return found


@pytest.mark.parametrize('path', CONFIGS, ids=[str(p.relative_to(SHIPPED)) for p in CONFIGS])
def test_shipped_config_is_flat(path):
    assert levels(path) <= 2, f'{path}: {levels(path)} levels of bases'
    inherited = own_bases(path)
    assert all('_base_' in b.relative_to(SHIPPED).parts for b in inherited), f'{path} inherits an experiment'
    assert len(inherited & RUNTIME_BASES) == 1, f'{path}: not exactly one runtime base'


def test_one_copy_of_the_input_normalisation_and_the_plugin_import():
    """The ImageNet mean/std block and the plugin's custom_imports are written once (per codebase's runtime), not in
    every config."""
    files = sorted(SHIPPED.rglob('*.py')) + TEST_CONFIGS
    assert [p for p in files if 'mean=[123.675' in p.read_text()] == [SHIPPED / '_base_' / 'default_runtime.py']
    assert {p for p in files if 'custom_imports = dict(' in p.read_text()} == RUNTIME_BASES


def test_levels_counts_the_inheritance_below_a_config(tmp_path):
    (tmp_path / 'leaf.py').write_text('a = 1\n')
    (tmp_path / 'mid.py').write_text("_base_ = ['./leaf.py', 'mmseg::_base_/default_runtime.py']\n")
    (tmp_path / 'top.py').write_text("_base_ = ['./mid.py']\n")
    assert [levels(tmp_path / f'{n}.py') for n in ('leaf', 'mid', 'top')] == [0, 1, 2]


@pytest.mark.parametrize('path', [pytest.param(p, marks=pytest.mark.integration) for p in FULL_SIZE] + TEST_CONFIGS,
                         ids=[str(p.relative_to(REPO)) for p in FULL_SIZE + TEST_CONFIGS])  # shipped: full-size models
def test_config_builds(path):
    cfg, model = build_model(path)
    backbone = model.student if type(model).__name__ == 'FeatureDistiller' else model.backbone
    assert type(backbone).__name__ in ('JetViT', 'JetViTSupernet')
    declared = (cfg.model.student if 'student' in cfg.model else cfg.model.backbone).get('arch')
    assert backbone.arch == (declared or backbone.arch) and len(backbone.blocks) == len(backbone.arch)
    if type(backbone).__name__ == 'JetViT':  # each layer runs the mixer its letter names
        table = backbone.mixer_table
        assert [type(b.attn) for b in backbone.blocks] == [table[letter].cls for letter in backbone.arch]


def test_jetvit_in_mmseg_encoder_decoder():
    cfg, model = build_model(REPO / 'tests/configs/seg_linear_probe_tiny_cityscapes.py')
    model.eval()
    with torch.no_grad():
        logits = model(torch.randn(2, 3, 48, 80), mode='tensor')  # 3x5 grid: not a multiple of the window
    assert logits.shape == (2, 19, 3, 5)
    assert all(not p.requires_grad for p in model.backbone.parameters())


def test_jetvit_in_mmdet_mask_rcnn():
    from mmdet.testing import demo_mm_inputs

    cfg, model = build_model(REPO / 'tests/configs/det_mask_rcnn_tiny_coco.py')
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


@pytest.mark.parametrize('name', ['jetvit/dinov3_base_cityscapes.py', 'depth/depthanything_large_distill.py'])
def test_distillation_keeps_weight_decay_off_norms_biases_gammas_and_tokens(name):
    """The student starts as the teacher: decaying its LayerNorms, LayerScale gammas or tokens would pull them
    away from the teacher values it is distilled to match (the rule of LayerDecayOptimWrapperConstructor too)."""
    from mmengine.optim import build_optim_wrapper

    cfg = Config.fromfile(REPO / 'configs' / name)
    import_modules_from_strings(**cfg.custom_imports)
    for part in ('teacher', 'student'):
        cfg.model[part].update(embed_dim=32, depth=4, num_heads=2)
    cfg.model.pop('distill_indices', None)
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope', 'mmseg')):
        from mmseg.registry import MODELS
        model = MODELS.build(cfg.model)
        optimizer = build_optim_wrapper(model, cfg.optim_wrapper).optimizer
    decay = {id(p): group['weight_decay'] for group in optimizer.param_groups for p in group['params']}
    base = cfg.optim_wrapper.optimizer.weight_decay
    tokens = ('cls_token', 'reg_token', 'pos_embed', 'mask_token')
    checked = set()
    for param_name, param in model.student.named_parameters():
        flat = param.ndim <= 1 or param_name.split('.')[0] in tokens
        assert decay[id(param)] == (0. if flat else base), param_name
        checked.add('flat' if flat else 'matrix')
    assert checked == {'flat', 'matrix'}
    assert any(n in tokens for n, _ in model.student.named_parameters())
