"""Any timm ViT of the supported block families as the teacher (issue 23, item 4): timm model names next to the
short names, all-F equal to the timm teacher, every letter building, clear errors for the rest."""
import pytest
import timm
import torch

from jetvit_mm.models import JetViT
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.teachers import create_teacher, teacher_depth, teacher_problems, teacher_qkv
from jetvit_mm.models.variants import VARIANTS

TINY = dict(embed_dim=32, depth=3, num_heads=2)
# (timm name, family, native size, another size): one per supported block family / token layout
FAMILIES = [
    ('vit_small_patch16_224', 'VisionTransformer', 224, (160, 192)),  # plain ViT, absolute position embeddings
    ('vit_small_patch14_reg4_dinov2', 'VisionTransformer', 518, (154, 196)),  # registers, patch-only pos. embeds
    ('eva02_tiny_patch14_224', 'Eva', 224, (154, 196)),  # EVA02: abs. pos. embeds + interleaved RoPE, SwiGLU
    ('vit_small_patch16_dinov3', 'Eva', 224, (160, 192)),  # DINOv3 by its timm name: RoPE (half layout), registers
    ('vit_base_patch16_rope_reg1_gap_256', 'Eva', 256, (160, 192)),  # a RoPE ViT without absolute embeds
]


def pair(name, seed=0, **kwargs):
    """A JetViT of ``name`` and the timm teacher it starts from, built under the same seed (same weights)."""
    torch.manual_seed(seed)
    jet = JetViT(name, **TINY, **kwargs).eval()
    torch.manual_seed(seed)
    teacher, _ = create_teacher(name, **TINY)
    return jet, teacher.eval()


@pytest.mark.parametrize('name,family,native,other', FAMILIES, ids=[f[0] for f in FAMILIES])
def test_all_full_equals_the_timm_teacher(name, family, native, other):
    jet, teacher = pair(name)
    assert type(teacher).__name__ == family and jet.family == family
    for size in ((native, native), other):
        x = torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            assert torch.equal(jet.forward_features(x), teacher.forward_features(x)), size
    # the comparison can fail: another teacher's weights differ
    other_teacher = create_teacher(name, **TINY)[0].eval()
    with torch.no_grad():
        assert not torch.equal(jet.forward_features(x), other_teacher.forward_features(x))


@pytest.mark.parametrize('name,family,native,other', FAMILIES, ids=[f[0] for f in FAMILIES])
def test_every_letter_builds_and_inherits_the_teacher(name, family, native, other):
    torch.manual_seed(0)
    model = JetViT(name, arch='LWF', mixers=default_mixers(W=dict(window_size=4)), **TINY).eval()
    torch.manual_seed(0)
    teacher, _ = create_teacher(name, **TINY)  # the same seed: the teacher the model started from
    assert [type(b.attn).__name__ for b in model.blocks] == ['LinearAttention', 'WindowAttention', 'FullAttention']
    for i in range(3):  # every mixer holds the teacher's q/k/v/o
        assert torch.equal(model.blocks[i].attn.qkv.weight, teacher_qkv(teacher.blocks[i].attn)[0])
        assert torch.equal(model.blocks[i].attn.proj.weight, teacher.blocks[i].attn.proj.weight)
    x = torch.randn(1, 3, *other)
    with torch.no_grad():
        out = model(x)[0]
    grid = (other[0] // model.patch_size, other[1] // model.patch_size)
    assert out.shape == (1, 32, *grid) and torch.isfinite(out).all()
    assert model.spec.model_name == name


def test_teacher_depth_of_short_and_timm_names():
    from jetvit_mm.benchmark.models import model_entries

    assert teacher_depth('dinov3_vitl16') == 24 and teacher_depth('vit_small_patch14_reg4_dinov2') == 12
    assert teacher_depth('eva02_large_patch14_448') == 24
    entries = model_entries(dict(model_name='eva02_tiny_patch14_224'), ['all-L'])
    assert [e['arch'] for e in entries] == ['F' * 12, 'L' * 12]


def test_short_names_stay_aliases_of_their_timm_models():
    for alias in ('dinov3_vits16', 'dinov2_vits14'):
        a, _ = pair(alias)
        b, _ = pair(VARIANTS[alias].timm_name, pos_embed_interp='dinov2')
        sa, sb = a.state_dict(), b.state_dict()
        assert [k for k in sa if k != '_extra_state'] == [k for k in sb if k != '_extra_state']
        assert all(torch.equal(sa[k], sb[k]) for k in sa if k != '_extra_state')
        x = torch.randn(1, 3, 224, 224)
        with torch.no_grad():
            assert torch.equal(a.forward_features(x), b.forward_features(x))


@pytest.mark.parametrize('name,message', [
    ('deit_tiny_distilled_patch16_224', 'it is a timm VisionTransformerDistilled .*subclass of VisionTransformer'),
    ('resnet18', 'it is a timm ResNet, not one of the supported families'),
    ('swin_tiny_patch4_window7_224', 'it is a timm SwinTransformer'),
    ('no_such_model', "unknown model_name 'no_such_model'; valid names: dinov3_vits16.*or the name of a timm model"),
])
def test_unsupported_models_say_what_they_lack(name, message):
    with pytest.raises(ValueError, match=message):
        JetViT(name, **TINY)


def test_attention_that_does_more_is_refused_naming_it():
    teacher = timm.create_model('vit_small_patch16_224', qk_norm=True, **TINY)
    assert teacher_problems(teacher) == ["layer 0's attention normalises q, which the mixers do not",
                                         "layer 0's attention normalises k, which the mixers do not"]
    eva = timm.create_model('eva02_tiny_patch14_224', depth=2, embed_dim=32, num_heads=2, scale_attn_inner=True)
    assert 'normalises its output before proj' in teacher_problems(eva)[0]
    assert teacher_problems(timm.create_model('vit_small_patch16_224', **TINY)) == []
