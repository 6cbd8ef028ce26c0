"""Registered mixers (issue 23, item 1): the registry, a model's declared letters, the mixer contract checked at
build time, the errors, the mmengine mirror and a plugin package joining through ``custom_imports``."""
import re
from typing import Optional, Tuple

import pytest
import torch
from torch import nn

from jetvit_mm.models import JetViT
from jetvit_mm.models.mixers import (
    DEFAULT_MIXERS,
    MIXER_REGISTRY,
    FullAttention,
    MixerContractError,
    TokenMixer,
    default_mixers,
    register_mixer,
)
from jetvit_mm.models.supernet import JetViTSupernet

from .conftest import REPO

PLUGIN = REPO / 'examples' / 'pooled_attention'
TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=3, num_heads=2)
X = torch.randn(1, 3, 64, 48, generator=torch.Generator().manual_seed(0))


@pytest.fixture
def plugin(monkeypatch):
    """The example plugin package importable (as a user's PYTHONPATH makes it)."""
    monkeypatch.syspath_prepend(str(PLUGIN))
    import jetvit_pooled
    return jetvit_pooled


def built(seed: int = 0, **kwargs) -> JetViT:
    torch.manual_seed(seed)
    return JetViT(**kwargs).eval()


def test_builtin_mixers_are_registered_and_the_default_table_is_today_s():
    assert {'FullAttention', 'WindowAttention', 'LinearAttention'} <= set(MIXER_REGISTRY.names())
    assert DEFAULT_MIXERS == dict(L=dict(type='LinearAttention', conv='squeeze'),
                                  W=dict(type='WindowAttention', window_size=16), F=dict(type='FullAttention'))


def test_explicit_default_table_and_default_mixers_build_the_same_model():
    a = built(arch='LWF', mixers=default_mixers(W=dict(window_size=2)), **TINY)
    b = built(arch='LWF', mixers=dict(L=dict(type='LinearAttention', conv='squeeze'),
                                      W=dict(type='WindowAttention', window_size=2), F=dict(type='FullAttention')),
              **TINY)
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    with torch.no_grad():
        assert torch.equal(a(X)[0], b(X)[0])
    # an L option reaches the L entry
    c = built(arch='LLF', mixers=default_mixers(L=dict(conv='static')), **TINY)
    assert type(c.blocks[0].attn.conv).__name__ == 'StaticDepthwiseConv'


def test_unregistered_type_names_the_letter_and_the_registered_types():
    with pytest.raises(ValueError, match=r"mixer 'P': unregistered mixer type 'Pooled'; registered types: .*"
                                         r"'FullAttention'.*custom_imports"):
        JetViT(mixers=dict(DEFAULT_MIXERS, P=dict(type='Pooled')), **TINY)


def test_declared_twice_is_refused():
    with pytest.raises(ValueError, match=r"declared twice, as 'W' and 'V'"):
        JetViT(mixers=dict(DEFAULT_MIXERS, V=dict(type='WindowAttention', window_size=16)), **TINY)


def test_former_mixer_arguments_name_the_mixers_entry_that_sets_them_now():
    """``mixers=`` is the one way to set a mixer option: the former arguments (``window_size=``, ``linear_cfg=``,
    ``window_kernel=``) are refused on every model naming the ``mixers.<letter>.<option>`` that sets them now and the
    table to pass (issue 47); any other unknown keyword with the valid ones."""
    from jetvit_mm.models import JetViTDepthAnything

    for build, message in ((lambda: JetViT(window_size=4, **TINY), "JetViT: window_size=4: no longer an argument; "
                            "set mixers.W.window_size in the mixer table: mixers={'L': {'type': 'LinearAttention', "
                            "'conv': 'squeeze'}, 'W': {'type': 'WindowAttention', 'window_size': 4}, 'F'"),
                           (lambda: JetViTSupernet(linear_cfg=dict(conv='static'), **TINY),
                            "JetViTSupernet: linear_cfg={'conv': 'static'}: no longer an argument; set mixers.L.conv"),
                           (lambda: JetViTSupernet(window_kernel='flex', **TINY), 'set mixers.W.kernel'),
                           (lambda: JetViTDepthAnything('dinov2_vits14', linear_cfg=dict(focusing=3.0), embed_dim=32,
                                                        depth=4, num_heads=2, out_indices=(0, 1, 2, 3), features=16,
                                                        out_channels=[8, 16, 32, 32]), 'set mixers.L.focusing'),
                           (lambda: JetViT(windows=4, **TINY), 'JetViT: unknown argument windows=4; remove or correct '
                                                               'it (valid: arch, checkpoint, depth'),
                           (lambda: JetViT(archh='LWLF', **TINY), "unknown argument archh='LWLF'; did you mean arch?")):
        with pytest.raises(TypeError, match=re.escape(message)):
            build()


def test_letter_in_arch_but_not_declared_names_it_and_the_declared_ones():
    with pytest.raises(ValueError, match=r"'P' at layer 1; valid letters: 'F', 'L', 'W'"):
        JetViT(arch='LPF', **TINY)
    with pytest.raises(ValueError, match=r"unknown mixer letter\(s\) \['W'\].*valid letters: F, L"):
        JetViTSupernet(search_space='LW', mixers=dict(L=DEFAULT_MIXERS['L'], F=DEFAULT_MIXERS['F']), **TINY)
    with pytest.raises(ValueError, match="no 'F'"):
        JetViT(arch='LLL', mixers=dict(L=DEFAULT_MIXERS['L']), **TINY)


class _Broken(TokenMixer):
    def __init__(self, dim, num_heads, qkv_bias=True, proj_bias=True, num_prefix_tokens=1, rotate_half=True,
                 attn_drop=0., proj_drop=0.):
        super().__init__(dim, num_heads, qkv_bias, proj_bias, num_prefix_tokens, rotate_half, proj_drop)


@register_mixer(name='TestWrongShape', force=True)
class _WrongShape(_Broken):
    def forward(self, x, grid_size, rope=None):
        return x[:, 1:]  # drops the prefix token


@register_mixer(name='TestWrongForward', force=True)
class _WrongForward(_Broken):
    def forward(self, x):
        return x


@register_mixer(name='TestWrongInit', force=True)
class _WrongInit(nn.Module):
    inherits = 'none'

    def __init__(self, dim, heads):
        super().__init__()

    def forward(self, x, grid_size, rope=None):
        return x


@register_mixer(name='TestNoInherits', force=True)
class _NoInherits(nn.Module):
    def __init__(self, dim, num_heads, qkv_bias, proj_bias, num_prefix_tokens, rotate_half, attn_drop, proj_drop):
        super().__init__()

    def forward(self, x, grid_size, rope=None):
        return x


@register_mixer(name='TestNoProj', force=True)
class _NoProj(_NoInherits):
    inherits = 'qkv_proj'


@pytest.mark.parametrize('type_name,message', [
    ('TestWrongShape', r"mixer 'P' \(TestWrongShape\) breaks the mixer contract \(wrong output shape\): for input "
                       r"\(1, 11, 32\).* returned \(1, 10, 32\)"),
    ('TestWrongForward', r"mixer 'P' \(TestWrongForward\) breaks the mixer contract \(wrong signature\): forward"),
    ('TestWrongInit', r"mixer 'P' \(TestWrongInit\) breaks the mixer contract \(wrong signature\).*does not take "
                      r"\['num_heads'"),
    ('TestNoInherits', r"`inherits` is None, expected one of \['qkv_proj', 'none'\]"),
    ('TestNoProj', r'inherits="qkv_proj" needs `qkv` = nn.Linear'),
])
def test_contract_is_checked_when_the_model_is_built(type_name, message):
    with pytest.raises(MixerContractError, match=message):
        JetViT(arch='FFF', mixers=dict(DEFAULT_MIXERS, P=dict(type=type_name)), **TINY)  # unused letter: checked


def test_a_model_builds_under_inference_mode_as_outside_it():
    """The build-time contract check runs outside the caller's torch.inference_mode(): a JetViT or a supernet built
    under it is the model built outside it (same weights, same output), not a broken mixer contract."""
    reference = built(arch='LWF', **TINY)
    with torch.inference_mode():
        model = built(arch='LWF', **TINY)
        torch.manual_seed(0)  # the same teacher; the L conv starts at zero, so the path computes the same
        supernet = JetViTSupernet(search_space='LWF', arch='LWF', **TINY).eval()
        out = model(X)[0]
        assert torch.allclose(supernet(X)[0], reference(X)[0].detach(), atol=1e-6)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), reference.state_dict().values()))
    assert torch.equal(out, reference(X)[0].detach())


def test_own_initialisation_mixer_takes_no_teacher_weights():
    @register_mixer(name='TestIdentityMixer', force=True)
    class Identity(nn.Module):
        inherits = 'none'

        def __init__(self, dim, num_heads, qkv_bias, proj_bias, num_prefix_tokens, rotate_half, attn_drop,
                     proj_drop, scale: float = 1.):
            super().__init__()
            self.gain = nn.Parameter(torch.full((dim,), scale))

        def forward(self, x: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor] = None):
            return x * self.gain

    model = built(arch='IFI', mixers=dict(DEFAULT_MIXERS, I=dict(type='TestIdentityMixer', scale=0.5)), **TINY)
    assert [n for n in model.state_dict() if n.startswith('blocks.0.attn')] == ['blocks.0.attn.gain']
    assert set(model.new_parameter_names()) == {'blocks.0.attn.gain', 'blocks.2.attn.gain'}
    assert model.spec.mixers['I'] == {'type': 'TestIdentityMixer', 'scale': 0.5}
    with pytest.raises(TypeError, match=r"mixer 'I' \(TestIdentityMixer\): unknown option\(s\) "
                                        r"\['mixers.I.scales'\]; valid options: \['mixers.I.scale'\]"):
        JetViT(mixers=dict(DEFAULT_MIXERS, I=dict(type='TestIdentityMixer', scales=0.5)), **TINY)


def test_plugin_mixer_joins_as_a_new_letter(plugin):
    model = built(arch='PWF', mixers=dict(DEFAULT_MIXERS, P=dict(type='PooledAttention')), **TINY)
    assert isinstance(model.blocks[0].attn, plugin.PooledAttention)
    assert model.spec.mixers['P'] == {'type': 'PooledAttention', 'pool_size': 2}
    teacher = built(**TINY)  # the same seed: P inherits the teacher's q/k/v/o
    assert torch.equal(model.blocks[0].attn.qkv.weight, teacher.blocks[0].attn.qkv.weight)
    with pytest.raises(ValueError, match='pool_size must be an int >= 1, got 0'):
        JetViT(mixers=dict(DEFAULT_MIXERS, P=dict(type='PooledAttention', pool_size=0)), **TINY)


def test_mirror_into_mmengine_models_and_custom_imports(tmp_path, plugin):
    from mmengine.config import Config
    from mmengine.registry import MODELS
    from mmengine.utils import import_modules_from_strings

    import jetvit_mm.mm  # noqa: F401 (the mirror)

    assert MODELS.get('WindowAttention') is MIXER_REGISTRY.get('WindowAttention')
    assert MODELS.get('PooledAttention') is plugin.PooledAttention  # registered in the core, mirrored
    # a config joins it through custom_imports only
    (tmp_path / 'cfg.py').write_text(
        "custom_imports = dict(imports=['jetvit_mm.mm', 'jetvit_pooled'], allow_failed_imports=False)\n"
        "model = dict(type='JetViT', model_name='dinov3_vits16', embed_dim=32, depth=3, num_heads=2, arch='PLF',\n"
        "             mixers=dict(L=dict(type='LinearAttention', conv='squeeze'),\n"
        "                         W=dict(type='WindowAttention', window_size=16), F=dict(type='FullAttention'),\n"
        "                         P=dict(type='PooledAttention', pool_size=3)))\n")
    cfg = Config.fromfile(tmp_path / 'cfg.py')
    import_modules_from_strings(**cfg.custom_imports)
    model = MODELS.build(cfg.model)
    assert model.arch == 'PLF' and model.blocks[0].attn.pool_size == 3

    # a mixer registered only in mmengine's MODELS is found too
    @MODELS.register_module(name='TestMMOnlyMixer', force=True)
    class MMOnly(FullAttention):
        pass

    assert MIXER_REGISTRY.get('TestMMOnlyMixer') is MMOnly
    assert isinstance(JetViT(arch='MFF', mixers=dict(DEFAULT_MIXERS, M=dict(type='TestMMOnlyMixer')),
                             **TINY).blocks[0].attn, MMOnly)

