"""The largest teachers: DINOv3-7B (``dinov3_vit7b16``) and DINOv2-giant (``dinov2_vitg14``, DepthAnythingV2-Giant's
backbone). Tiny random files in their official layouts load to the timm reference's outputs; every mixer letter and
the supernet build on both; the real sizes build on the meta device.

The official files are written here by inverse mappings kept in this file, and each is checked independently of the
converters under test: timm's own ``checkpoint_filter_fn`` must turn it into the timm model's exact state dict.
"""
from typing import Dict

import pytest
import timm
import torch
from timm.models.eva import checkpoint_filter_fn as eva_filter
from timm.models.vision_transformer import checkpoint_filter_fn as vit_filter

from jetvit_mm.models.checkpoint import apply_checkpoint, to_jetvit_names
from jetvit_mm.models.depth_anything import JetViTDepthAnything
from jetvit_mm.models.heads.dpt import dpt_preset
from jetvit_mm.models.jetvit import JetViT
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.supernet import JetViTSupernet
from jetvit_mm.models.variants import get_variant

StateDict = Dict[str, torch.Tensor]
TINY_7B = dict(embed_dim=64, num_heads=4, depth=2)
TINY_G = dict(embed_dim=64, num_heads=4, depth=2)
# DINOv2-g's fused SwiGLU width as the official vit_giant2 computes it from mlp_ratio 4 (timm's fixed ratio 5.33334
# gives it only at D=1536: at D=64 an odd 341): packed fc1 = 2 x 176
G_HIDDEN = (int(4 * 64 * 2 / 3) + 7) // 8 * 8
TIMM_G = dict(TINY_G, mlp_ratio=(2 * G_HIDDEN + 0.5) / 64)
ATOL = 1e-5


@torch.no_grad()
def randomise_(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if p.dim() >= 2 and not name.endswith(('token', 'pos_embed')):
            p.copy_(torch.randn(p.shape, generator=g) * p[0].numel() ** -0.5)
        elif name.endswith(('gamma_1', 'gamma_2', 'gamma')):
            p.copy_(0.5 + torch.rand(p.shape, generator=g))
        else:
            p.copy_(0.3 * torch.randn(p.shape, generator=g) + (1.0 if 'norm' in name and 'weight' in name else 0.0))
    return model


def timm_model(name: str, seed: int = 0, **kwargs) -> torch.nn.Module:
    model = timm.create_model(name, pretrained=False, num_classes=0, dynamic_img_size=True, **kwargs)
    return randomise_(model, seed).eval()


def official_7b(state: StateDict, periods: torch.Tensor) -> StateDict:
    """timm ``vit_7b_patch16_dinov3`` -> facebookresearch/dinov3 ``dinov3_vit7b16`` names: no qkv bias (so no
    ``bias_mask``), SwiGLU ``w1``/``w2``/``w3``, storage tokens, ``ls*.gamma``, the untied ``local_cls_norm``,
    ``mask_token`` and the RoPE periods stored in bf16."""
    names = {'.gamma_1': '.ls1.gamma', '.gamma_2': '.ls2.gamma', '.mlp.fc1_g.': '.mlp.w1.', '.mlp.fc1_x.': '.mlp.w2.',
             '.mlp.fc2.': '.mlp.w3.', 'reg_token': 'storage_tokens'}
    out = {}
    for key, value in state.items():
        assert not key.endswith(('q_bias', 'k_bias', 'v_bias', 'qkv.bias')), key  # 7B: qkv_bias=False
        for old, new in names.items():
            key = key.replace(old, new)
        out[key] = value
    dim = state['cls_token'].shape[-1]
    out['mask_token'] = torch.randn(1, dim)
    out['rope_embed.periods'] = periods.bfloat16()
    out['local_cls_norm.weight'], out['local_cls_norm.bias'] = torch.rand(dim) + 0.5, torch.randn(dim)
    return out


def official_giant(state: StateDict) -> StateDict:
    """timm ``vit_giant_patch14_dinov2`` -> facebookresearch/dinov2 ``vit_giant2`` (fused SwiGLU ``w12``/``w3``)."""
    out = {k.replace('.mlp.fc1.', '.mlp.w12.').replace('.mlp.fc2.', '.mlp.w3.'): v for k, v in state.items()}
    out['mask_token'] = torch.randn(1, state['cls_token'].shape[-1])
    return out


def images(h: int, w: int, batch: int = 1) -> torch.Tensor:
    return torch.randn(batch, 3, h, w, generator=torch.Generator().manual_seed(3))


# ------------------------------------------------------------------------------------------------ DINOv3-7B
def test_official_7b_layout_loads_to_the_timm_outputs(tmp_path):
    teacher = timm_model('vit_7b_patch16_dinov3', **TINY_7B)
    stored = teacher.rope.periods.clone()
    official = official_7b(teacher.state_dict(), stored)
    # the file is what timm's own converter reads as official DINOv3: it gives back the timm state exactly
    assert set(eva_filter(dict(official), teacher)) == set(teacher.state_dict())
    assert not any(k.endswith('bias_mask') or k.endswith('qkv.bias') for k in official)
    path = tmp_path / 'dinov3_vit7b16_pretrain_lvd1689m-a955f4ea.pth'
    torch.save(official, path)
    x = images(32, 48, batch=2)
    with torch.no_grad():
        teacher.rope.periods.copy_(stored.bfloat16().float())  # the official model computes with the stored values
        expected = teacher.forward_features(x)
        model = JetViT('dinov3_vit7b16', **TINY_7B).eval()
        assert model.load_checkpoint(path) == 'dinov3_official'
        assert not model.qkv_bias and model.reg_token.shape[1] == 4
        assert (model.forward_features(x) - expected).abs().max().item() < ATOL
        # the SwiGLU order matters: w1 is the gated (SiLU) half
        swapped = dict(official)
        for i in range(TINY_7B['depth']):
            for p in ('weight', 'bias'):
                swapped[f'blocks.{i}.mlp.w1.{p}'], swapped[f'blocks.{i}.mlp.w2.{p}'] = \
                    official[f'blocks.{i}.mlp.w2.{p}'], official[f'blocks.{i}.mlp.w1.{p}']
        torch.save(swapped, tmp_path / 'swapped.pth')
        model.load_checkpoint(tmp_path / 'swapped.pth')
        assert (model.forward_features(x) - expected).abs().max().item() > 1e-3


def test_official_7b_in_bf16_loads_into_fp32():
    teacher = timm_model('vit_7b_patch16_dinov3', **TINY_7B)
    official = {k: v.bfloat16() for k, v in official_7b(teacher.state_dict(), teacher.rope.periods).items()}
    model = JetViT('dinov3_vit7b16', **TINY_7B)
    state, fmt = to_jetvit_names(official)
    apply_checkpoint(model, state, source='bf16 official')
    assert fmt == 'dinov3_official' and model.blocks[0].mlp.fc1_g.weight.dtype == torch.float32
    assert torch.equal(model.blocks[0].mlp.fc1_g.weight, official['blocks.0.mlp.w1.weight'].float())


def test_7b_real_size_on_meta():
    with torch.device('meta'):
        model = JetViT('dinov3_vit7b16')
    assert (model.embed_dim, model.depth, model.num_heads) == (4096, 40, 32)
    assert model.reg_token.shape == (1, 4, 4096) and not model.qkv_bias
    assert model.blocks[0].mlp.fc1_g.weight.shape == (8192, 4096)  # ffn_ratio 3, swiglu64
    params = sum(p.numel() for p in model.parameters())
    assert 6.70e9 < params < 6.73e9, params
    assert model.patch_embed.proj.weight.is_meta


# ------------------------------------------------------------------------------------------------ DINOv2-giant
def test_depth_anything_v2_giant_layout_loads_to_the_timm_outputs(tmp_path):
    teacher = timm_model('vit_giant_patch14_dinov2', **TIMM_G)
    assert teacher.blocks[0].mlp.fc1.out_features == 2 * G_HIDDEN == 352
    backbone = official_giant(teacher.state_dict())
    assert set(vit_filter(dict(backbone), teacher)) == set(teacher.state_dict())  # timm reads it as official DINOv2
    head = JetViTDepthAnything('dinov2_vitg14', features=16, out_channels=(8, 8, 16, 16), out_indices=(0, 0, 1, 1),
                               **TINY_G).depth_head.state_dict()
    da2 = {**{'pretrained.' + k: v for k, v in backbone.items()}, **{'depth_head.' + k: v for k, v in head.items()}}
    path = tmp_path / 'depth_anything_v2_vitg.pth'
    torch.save(da2, path)
    x = images(518, 518)  # the native grid: no position-embedding interpolation in either model
    with torch.no_grad():
        expected = teacher.forward_features(x)
        model = JetViT('dinov2_vitg14', **TINY_G).eval()
        assert model.load_checkpoint(path) == 'depth_anything_v2'
        assert (model.forward_features(x) - expected).abs().max().item() < ATOL
        depth = JetViTDepthAnything('dinov2_vitg14', checkpoint=path, features=16, out_channels=(8, 8, 16, 16),
                                    out_indices=(0, 0, 1, 1), **TINY_G)
        assert torch.equal(depth.depth_head.projects[0].weight, head['projects.0.weight'])


def test_giant_real_size_on_meta_with_the_dpt_g_preset():
    assert dpt_preset('dinov2_vitg14') == dpt_preset('vitg')
    assert (dpt_preset('vitg').features, dpt_preset('vitg').out_channels) == (384, (1536, 1536, 1536, 1536))
    with torch.device('meta'):
        model = JetViTDepthAnything('dinov2_vitg14')
    backbone = model.backbone
    assert (backbone.embed_dim, backbone.depth, backbone.num_heads, backbone.patch_size) == (1536, 40, 24, 14)
    assert backbone.out_indices == (9, 19, 29, 39)
    assert backbone.blocks[0].mlp.fc1.weight.shape == (8192, 1536)  # packed: 2 x 4096
    assert model.depth_head.projects[0].weight.shape[:2] == (1536, 1536)
    params = sum(p.numel() for p in backbone.parameters())
    assert 1.13e9 < params < 1.14e9, params


# ------------------------------------------------------------------------------------------------ mixers, supernet
@pytest.mark.parametrize('model_name,shape', [('dinov3_vit7b16', TINY_7B), ('dinov2_vitg14', TINY_G)])
def test_every_mixer_and_the_supernet_build_on_the_large_teachers(model_name, shape):
    size = 32 if get_variant(model_name).family == 'dinov3' else 28
    x = images(size, 2 * size)
    teacher = JetViT(model_name, **shape).eval()
    with torch.no_grad():
        for arch in ('LL', 'WW', 'FF', 'LW'):
            model = JetViT(model_name, arch=arch, mixers=default_mixers(W=dict(window_size=2)), **shape).eval()
            apply_checkpoint(model, teacher.state_dict(), source='teacher')
            out = model.forward_features(x)
            tokens = teacher.num_prefix_tokens + 2 * (size // teacher.patch_size) ** 2
            assert out.shape == (1, tokens, shape['embed_dim'])
            assert torch.isfinite(out).all()
    supernet = JetViTSupernet(search_space='LWF', model_name=model_name,
                              mixers=default_mixers(W=dict(window_size=2)), **shape)
    apply_checkpoint(supernet, teacher.state_dict(), source='teacher')
    supernet.set_arch('FF')
    with torch.no_grad():
        assert torch.allclose(supernet.eval().forward_features(x), teacher.eval().forward_features(x), atol=ATOL)
    for arch in ('LW', 'WL'):
        supernet.set_arch(arch)
        sub = supernet.extract_subnet(arch)
        with torch.no_grad():
            assert torch.allclose(sub.eval().forward_features(x), supernet.forward_features(x), atol=ATOL)
