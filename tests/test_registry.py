"""Every type jetvit_mm registers builds from an mmseg-scope and an mmdet-scope config."""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmengine.utils import import_modules_from_strings

CONFIGS = Path(__file__).parent / 'configs'
SCOPES = {'mmseg': 'registry_mmseg.py', 'mmdet': 'registry_mmdet.py'}
ALIASES = {'PlainCheckpointHook': 'CheckpointDigestHook'}  # a former name, which old configs declare


def scope_registry(scope: str, kind: str = 'model'):
    """The mmseg / mmdet registry of ``kind`` ('model', 'hook', ...)."""
    import importlib

    module = importlib.import_module(f'{scope}.registry')
    return {'model': module.MODELS, 'hook': module.HOOKS, 'metric': module.METRICS, 'dataset': module.DATASETS,
            'transform': module.TRANSFORMS, 'optimizer wrapper constructor': module.OPTIM_WRAPPER_CONSTRUCTORS}[kind]


def kind_of(name: str) -> str:
    from jetvit_mm.mm import registered_types

    return next(kind for kind, names in registered_types().items() if name in names)


def load(scope: str) -> Config:
    cfg = Config.fromfile(CONFIGS / SCOPES[scope])
    assert cfg.default_scope == scope
    import_modules_from_strings(**cfg.custom_imports)
    return cfg


def test_every_registered_type_has_an_example():
    from jetvit_mm.mm import registered_types

    registered = sorted(name for names in registered_types().values() for name in names)
    assert {'JetViT', 'LinearProbeHead', 'SupernetSamplerHook'} <= set(registered)
    assert sorted(load('mmseg').examples) == registered


@pytest.mark.parametrize('scope', sorted(SCOPES))
def test_registered_types_build_in_scope(scope):
    cfg = load(scope)
    with DefaultScope.overwrite_default_scope(scope):
        for name, example in cfg.examples.items():
            module = scope_registry(scope, kind_of(name)).build(example)
            assert type(module).__name__ == ALIASES.get(name, name)
            assert type(module).__module__.startswith('jetvit_mm.')


@pytest.mark.parametrize('scope', sorted(SCOPES))
def test_linear_probe_head_runs_and_learns_in_scope(scope):
    """The head built under either scope computes its loss with mmseg's cross-entropy."""
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    cfg = load(scope)
    with DefaultScope.overwrite_default_scope(scope):
        head = scope_registry(scope).build(cfg.examples['LinearProbeHead'])
    head.init_weights()
    assert abs(head.conv_seg.weight.std().item() - 0.01) < 0.005
    feats = (torch.randn(2, 16, 4, 8), )
    samples = []
    for _ in range(2):
        sample = SegDataSample(metainfo=dict(img_shape=(32, 64), pad_shape=(32, 64)))
        sample.gt_sem_seg = PixelData(data=torch.randint(0, 5, (1, 32, 64)))
        samples.append(sample)
    losses = head.loss(feats, samples, train_cfg={})
    assert set(losses) == {'loss_ce', 'acc_seg'}
    losses['loss_ce'].backward()
    assert head.conv_seg.weight.grad.abs().sum() > 0 and head.bn.weight.grad is not None


@pytest.mark.parametrize('scope', sorted(SCOPES))
def test_unknown_type_names_type_and_registry(scope):
    load(scope)
    with DefaultScope.overwrite_default_scope(scope):
        with pytest.raises(KeyError) as err:
            scope_registry(scope).build(dict(type='LinearProbeHeadTypo', in_channels=4, num_classes=2))
    message = str(err.value)
    assert 'LinearProbeHeadTypo' in message and f'{scope}::model' in message
