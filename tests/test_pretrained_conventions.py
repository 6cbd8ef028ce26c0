"""mmseg's and mmdet's conventions for pretrained weights on the registered backbones:
``init_cfg=dict(type='Pretrained', checkpoint=..., prefix=...)`` and ``pretrained=`` (also through
``EncoderDecoder(pretrained=...)``), loaded by ``init_weights()`` through the strict, format-detecting loader."""
import os
from copy import deepcopy

import pytest
import torch
from mmengine.config import ConfigDict
from mmengine.registry import DefaultScope

import jetvit_mm.mm  # noqa: F401  (registers the types)
from jetvit_mm.models import JetViT as PureJetViT
from jetvit_mm.models.mixers import default_mixers

TINY = dict(model_name='dinov3_vits16', arch='LWLF', embed_dim=32, depth=4, num_heads=2,
            mixers=default_mixers(W=dict(window_size=4)))


def _registry(scope: str):
    import importlib

    return importlib.import_module(f'{scope}.registry').MODELS


def build(scope: str, cfg: dict):
    with DefaultScope.overwrite_default_scope(scope):
        return _registry(scope).build(ConfigDict(deepcopy(cfg)))  # as a config file gives it


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """A tiny hybrid with weights unlike a fresh build's, saved as a JetViT checkpoint and inside a segmentor's."""
    torch.manual_seed(1)
    model = PureJetViT(**TINY)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    root = tmp_path_factory.mktemp('pretrained')
    plain = root / 'jetvit.pth'
    torch.save(model.state_dict(), plain)
    wrapped = root / 'segmentor.pth'
    torch.save({'state_dict': {**{f'backbone.{k}': v for k, v in model.state_dict().items()},
                               'decode_head.conv_seg.weight': torch.zeros(19, 32, 1, 1)}, 'meta': {}}, wrapped)
    return dict(model=model, plain=plain, wrapped=wrapped, root=root)


def assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    differ = [k for k in sa if not torch.equal(sa[k], sb[k])]
    assert not differ, differ[:8]


def _differs(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return any(not torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.parametrize('scope', ['mmseg', 'mmdet'])
def test_init_cfg_pretrained_loads_in_init_weights(trained, scope):
    backbone = build(scope, dict(type='JetViT', **TINY, init_cfg=dict(type='Pretrained',
                                                                          checkpoint=str(trained['plain']))))
    assert _differs(backbone, trained['model'])  # nothing loaded at build time, as mmseg's own backbones
    backbone.init_weights()
    assert_same_weights(backbone, trained['model'])


@pytest.mark.parametrize('scope', ['mmseg', 'mmdet'])
def test_init_cfg_prefix_takes_a_submodules_weights(trained, scope):
    backbone = build(scope, dict(type='JetViT', **TINY, init_cfg=dict(
        type='Pretrained', checkpoint=str(trained['wrapped']), prefix='backbone.')))
    backbone.init_weights()
    assert_same_weights(backbone, trained['model'])
    wrong = build(scope, dict(type='JetViT', **TINY, init_cfg=dict(
        type='Pretrained', checkpoint=str(trained['wrapped']), prefix='neck.')))
    with pytest.raises(ValueError, match=r"no weights under the prefix 'neck\.'.*backbone\."):
        wrong.init_weights()


def test_segmentor_pretrained_reaches_the_backbone(trained):
    """``EncoderDecoder(pretrained=PATH)`` sets ``backbone.pretrained``, as for mmseg's ViT; the runner's
    ``init_weights()`` then loads it."""
    cfg = dict(type='EncoderDecoder', pretrained=str(trained['plain']),
               data_preprocessor=dict(type='SegDataPreProcessor', size=(32, 32)),
               backbone=dict(type='JetViT', **TINY),
               decode_head=dict(type='LinearProbeHead', in_channels=32, num_classes=19))
    with pytest.warns(DeprecationWarning, match='pretrained= is deprecated'):
        segmentor = build('mmseg', cfg)
    assert segmentor.backbone.init_cfg == dict(type='Pretrained', checkpoint=str(trained['plain']))
    segmentor.init_weights()
    assert_same_weights(segmentor.backbone, trained['model'])


def test_pretrained_goes_through_the_strict_loader(trained):
    """A checkpoint that lacks a weight is refused with the same error as ``checkpoint=`` gives."""
    state = dict(trained['model'].state_dict())
    del state['norm.weight']
    path = trained['root'] / 'incomplete.pth'
    torch.save(state, path)
    backbone = build('mmseg', dict(type='JetViT', **TINY, pretrained=str(path)))
    with pytest.raises(RuntimeError) as pretrained_error:
        backbone.init_weights()
    with pytest.raises(RuntimeError) as checkpoint_error:
        PureJetViT(**TINY, checkpoint=path)
    assert 'norm.weight' in str(pretrained_error.value)
    assert str(pretrained_error.value) == str(checkpoint_error.value)


def test_pretrained_refuses_unsafe_pickles(trained, tmp_path):
    class Exploit:
        def __reduce__(self):
            return (os.system, (f'touch {tmp_path / "ran"}',))

    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': trained['model'].state_dict(), 'meta': {'x': Exploit()}}, path)
    backbone = build('mmseg', dict(type='JetViT', **TINY, init_cfg=dict(type='Pretrained', checkpoint=str(path))))
    with pytest.raises(Exception, match='(?i)weights only|refused'):
        backbone.init_weights()
    assert not (tmp_path / 'ran').exists()


@pytest.mark.parametrize('kwargs, message', [
    (dict(pretrained='a.pth', init_cfg=dict(type='Pretrained', checkpoint='a.pth')), 'init_cfg and pretrained'),
    (dict(pretrained='a.pth', checkpoint='a.pth'), 'pretrained and checkpoint'),
    (dict(init_cfg=dict(type='Normal', std=0.02)), r"init_cfg must be dict\(type='Pretrained'"),
    (dict(init_cfg=dict(type='Pretrained', checkpoint='a.pth', strict=False)), r"takes checkpoint, prefix.*strict"),
    (dict(pretrained=3), 'pretrained must be a path'),
])
def test_bad_pretrained_settings_name_the_problem(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        build('mmseg', dict(type='JetViT', **TINY, **kwargs))


def test_supernet_takes_init_cfg(tmp_path):
    """A supernet's init_cfg loads a teacher (all-F) checkpoint, as its ``checkpoint=`` does."""
    torch.manual_seed(2)
    teacher = PureJetViT(**{**TINY, 'arch': 'FFFF'})
    with torch.no_grad():
        for p in teacher.parameters():
            p.add_(1.0)
    torch.save(teacher.state_dict(), tmp_path / 'teacher.pth')
    supernet_cfg = dict(type='JetViTSupernet', search_space='LW', **{k: v for k, v in TINY.items() if k != 'arch'})
    supernet = build('mmseg', dict(supernet_cfg, init_cfg=dict(type='Pretrained',
                                                              checkpoint=str(tmp_path / 'teacher.pth'))))
    reference = build('mmseg', dict(supernet_cfg, checkpoint=str(tmp_path / 'teacher.pth')))
    assert not torch.equal(supernet.blocks[0].mlp.fc1.weight, teacher.blocks[0].mlp.fc1.weight)
    supernet.init_weights()
    torch.testing.assert_close(supernet.blocks[0].mlp.fc1.weight, teacher.blocks[0].mlp.fc1.weight, rtol=0, atol=0)
    shared = [k for k in reference.state_dict() if '.conv.' not in k]  # the L convs stay as initialised
    differ = [k for k in shared if not torch.equal(supernet.state_dict()[k], reference.state_dict()[k])]
    assert not differ, differ[:8]
