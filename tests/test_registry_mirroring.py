"""Mirroring the token mixers into mmengine's MODELS (jetvit_mm/mm/models/mixers.py) never overwrites a type another
package registered under the same name (issue #31 item 5): it warns, the other type stays, and a model's mixers table
still builds the mixer from the core registry."""
import pytest
import torch
from mmengine.registry import MODELS
from torch import nn

import jetvit_mm.mm  # noqa: F401  (the mirroring)
from jetvit_mm.models import JetViT
from jetvit_mm.models.mixers import MIXER_REGISTRY, WindowAttention, register_mixer

NAME = 'MirroringProbeAttention'


class ForeignModule(nn.Module):
    """Another package's type (not a token mixer) that happens to use the mixer's name."""


class ProbeAttention(WindowAttention):
    """A window attention under a name another package took."""


@pytest.fixture
def foreign():
    MODELS.register_module(name=NAME, module=ForeignModule)
    yield
    MODELS.module_dict.pop(NAME, None)
    MIXER_REGISTRY._classes.pop(NAME, None)


def test_a_foreign_type_keeps_its_name_and_the_mixer_still_builds(foreign):
    with pytest.warns(UserWarning, match=rf"'{NAME}' .* is not mirrored into mmengine's MODELS, where .*ForeignModule"):
        register_mixer(ProbeAttention, name=NAME)
    assert MODELS.get(NAME) is ForeignModule  # not overwritten
    model = JetViT('dinov3_vits16', arch='LX', embed_dim=32, depth=2, num_heads=2,
                   mixers=dict(L=dict(type='LinearAttention'), F=dict(type='FullAttention'),
                               X=dict(type=NAME, window_size=2)))
    assert isinstance(model.blocks[1].attn, ProbeAttention)
    assert model(torch.randn(1, 3, 32, 48))[0].shape[-2:] == (2, 3)


def test_a_mixer_replaced_under_its_own_name_is_mirrored():
    class Replacement(WindowAttention):
        pass

    try:
        register_mixer(ProbeAttention, name=NAME)
        assert MODELS.get(NAME) is ProbeAttention
        register_mixer(Replacement, name=NAME, force=True)
        assert MODELS.get(NAME) is Replacement
    finally:
        MODELS.module_dict.pop(NAME, None)
        MIXER_REGISTRY._classes.pop(NAME, None)
