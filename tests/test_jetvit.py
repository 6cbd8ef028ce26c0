"""JetViT backbone: arch 'all F' == the timm teacher, DINOv2 position-embedding conventions, teacher weights kept
in hybrid archs, output contract, and the errors users see for bad arguments or inputs.

All models are tiny (embed_dim 64, 4 heads, 2-4 layers) with every parameter randomised (timm's LayerScale init of
1e-5 would make the blocks numerically invisible), so a wrong weight mapping or a wrong op changes the output far
beyond the tolerances below.
"""
import math
from pathlib import Path
from typing import Dict, Tuple

import pytest
import timm
import torch
import torch.nn.functional as F

from jetvit_mm.models.arch import SPEC_KEY, ArchSpec
from jetvit_mm.models.checkpoint import apply_checkpoint
from jetvit_mm.models.jetvit import JetViT
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.pos_embed import resize_pos_embed
from jetvit_mm.models.variants import VARIANTS

TINY = dict(embed_dim=64, num_heads=4)
ATOL = 1e-5
DINOV2_NATIVE_GRID = 37  # timm's DINOv2 position embedding covers 37 x 37 patches (518 x 518 pixels)


# ---------------------------------------------------------------------------------------------------- helpers
@torch.no_grad()
def randomise_(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Give every parameter a non-trivial random value: fan-in scaled matrices, LayerScale in [0.5, 1.5], ..."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if name.endswith(('token', 'tokens', 'pos_embed')):
            p.copy_(0.5 * torch.randn(p.shape, generator=g))
        elif p.dim() >= 2:
            p.copy_(torch.randn(p.shape, generator=g) * p[0].numel() ** -0.5)
        elif name.endswith(('gamma', 'gamma_1', 'gamma_2', 'lambda1')):
            p.copy_(0.5 + torch.rand(p.shape, generator=g))
        elif 'norm' in name and name.endswith('weight'):
            p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
        else:
            p.copy_(0.2 * torch.randn(p.shape, generator=g))
    return model


def timm_teacher(timm_name: str, depth: int = 2, seed: int = 0, **kwargs) -> torch.nn.Module:
    """The timm reference model at tiny size, randomised, in eval mode."""
    model = timm.create_model(timm_name, pretrained=False, num_classes=0, dynamic_img_size=True, depth=depth,
                              **TINY, **kwargs)
    return randomise_(model, seed).eval()


def save_state(model: torch.nn.Module, path: Path) -> Path:
    torch.save(model.state_dict(), path)
    return path


def images(height: int, width: int, batch: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, 3, height, width, generator=torch.Generator().manual_seed(seed))


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return (a - b).abs().max().item()


def tokens_to_map(tokens: torch.Tensor, num_prefix: int, grid: Tuple[int, int]) -> torch.Tensor:
    """[B, prefix + h*w, D] -> patch map [B, D, h, w]."""
    patches = tokens[:, num_prefix:]
    return patches.transpose(1, 2).reshape(patches.shape[0], patches.shape[2], *grid)


# ------------------------------------------------------------------------------------- 1. all F == timm teacher
# (JetViT model_name, timm reference, JetViT kwargs, prefix tokens, patch size, input sizes (one non-square)): every
# registered variant at tiny size, and DINOv3 with the qkv bias some timm variants have
def _teacher_case(model_name: str, timm_name: str = None, **kwargs):
    variant = VARIANTS[model_name]
    if variant.family == 'dinov3':
        return model_name, timm_name or variant.timm_name, kwargs, 5, 16, [(48, 48), (32, 80)]
    return model_name, variant.timm_name, dict(kwargs, pos_embed_interp='timm'), 1, 14, [(42, 42), (28, 70)]


TEACHER_CASES = [_teacher_case(name) for name in VARIANTS] + [
    _teacher_case('dinov3_vits16', 'vit_small_patch16_dinov3_qkvb', qkv_bias=True)]
TEACHER_IDS = [c[1] for c in TEACHER_CASES]


@pytest.mark.parametrize('model_name,timm_name,kwargs,num_prefix,patch,sizes', TEACHER_CASES, ids=TEACHER_IDS)
def test_all_full_arch_equals_timm_teacher(tmp_path, model_name, timm_name, kwargs, num_prefix, patch, sizes):
    teacher = timm_teacher(timm_name, depth=3, **VARIANTS[model_name].timm_kwargs(TINY['embed_dim']))
    ckpt = save_state(teacher, tmp_path / 'teacher.pth')
    model = JetViT(model_name, arch='FFF', checkpoint=ckpt, depth=3, out_indices=(0, 1, 2), **TINY, **kwargs).eval()
    assert model.num_prefix_tokens == num_prefix and model.patch_size == patch
    for height, width in sizes:
        x = images(height, width)
        grid = (height // patch, width // patch)
        with torch.no_grad():
            ref = teacher.forward_features(x)
            ref_maps = teacher.forward_intermediates(x, indices=[0, 1, 2], norm=True, output_fmt='NCHW',
                                                     intermediates_only=True)
            out = model.forward_features(x)
            maps = model(x)
        assert ref.shape == (2, num_prefix + grid[0] * grid[1], 64)
        assert ref.std() > 0.3  # a non-degenerate reference
        assert max_diff(out, ref) < ATOL
        assert len(maps) == 3
        for mine, theirs in zip(maps, ref_maps):
            assert mine.shape == (2, 64, *grid)
            assert max_diff(mine, theirs) < ATOL
        assert max_diff(maps[-1], tokens_to_map(ref, num_prefix, grid)) < ATOL


def test_teacher_cases_cover_every_registered_variant():
    assert {case[0] for case in TEACHER_CASES} == set(VARIANTS)


def test_teacher_comparison_is_sensitive(tmp_path):
    """The 1e-5 check above can fail: one LayerScale entry changed by 1% moves the output well past it."""
    teacher = timm_teacher('vit_small_patch16_dinov3', depth=2)
    model = JetViT('dinov3_vits16', checkpoint=save_state(teacher, tmp_path / 't.pth'), depth=2, **TINY).eval()
    x = images(32, 48)
    with torch.no_grad():
        before = model.forward_features(x)
        model.blocks[1].ls2.gamma[0] *= 1.01
        after = model.forward_features(x)
    assert max_diff(before, after) > 100 * ATOL


# ------------------------------------------------------------------------ DINOv2 position-embedding conventions
def original_dinov2_pos_embed(pos_embed: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """The original DINOv2 / DepthAnythingV2 interpolation, written from its description in REFERENCE.md."""
    num_patches = pos_embed.shape[1] - 1
    side = int(math.sqrt(num_patches))
    assert side * side == num_patches
    if (h, w) == (side, side):
        return pos_embed
    cls_pos, patch_pos = pos_embed[:, :1], pos_embed[:, 1:].float()
    patch_pos = patch_pos.reshape(1, side, side, -1).permute(0, 3, 1, 2)
    patch_pos = F.interpolate(patch_pos, scale_factor=(float(h + 0.1) / side, float(w + 0.1) / side),
                              mode='bicubic', antialias=False)
    assert tuple(patch_pos.shape[-2:]) == (h, w)
    patch_pos = patch_pos.permute(0, 2, 3, 1).reshape(1, h * w, -1)
    return torch.cat([cls_pos, patch_pos.to(pos_embed.dtype)], dim=1)


def dinov2_reference_features(teacher: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A DINOv2 forward pass built from the timm teacher's layers but with the original position embedding."""
    patch = teacher.patch_embed.proj
    tokens = F.conv2d(x, patch.weight, patch.bias, stride=14).flatten(2).transpose(1, 2)
    tokens = torch.cat([teacher.cls_token.expand(x.shape[0], -1, -1), tokens], dim=1)
    tokens = tokens + original_dinov2_pos_embed(teacher.pos_embed, x.shape[-2] // 14, x.shape[-1] // 14)
    for block in teacher.blocks:
        tokens = block(tokens)
    return teacher.norm(tokens)


GRIDS = [1, 2, 3, 5, 16, 36, 37, 38, 40, 75]


def test_resize_pos_embed_matches_original_dinov2_interpolation():
    pos_embed = torch.randn(1, 1 + DINOV2_NATIVE_GRID ** 2, 8, generator=torch.Generator().manual_seed(0))
    for h in GRIDS:
        for w in GRIDS:
            expected = original_dinov2_pos_embed(pos_embed, h, w)
            got = resize_pos_embed(pos_embed, (h, w), 1, 'dinov2')
            assert got.shape == (1, 1 + h * w, 8)
            assert torch.equal(got, expected), (h, w)
            assert torch.equal(got[:, :1], pos_embed[:, :1])
    native = (DINOV2_NATIVE_GRID, DINOV2_NATIVE_GRID)
    for mode in ('dinov2', 'timm'):
        assert torch.equal(resize_pos_embed(pos_embed, native, 1, mode), pos_embed)
    # the two conventions really differ away from the native grid (else the tests below could not tell them apart)
    for grid in [(2, 3), (38, 40), (36, 37)]:
        original, timm_style = (resize_pos_embed(pos_embed, grid, 1, mode) for mode in ('dinov2', 'timm'))
        assert max_diff(original, timm_style) > 1e-3


@pytest.mark.parametrize('size', [(28, 42), (56, 70)])
def test_dinov2_interp_model_matches_original_dinov2(tmp_path, size):
    teacher = timm_teacher('vit_small_patch14_dinov2', depth=2)
    model = JetViT('dinov2_vits14', checkpoint=save_state(teacher, tmp_path / 't.pth'), depth=2, **TINY).eval()
    assert model.pos_embed_interp == 'dinov2'  # the default
    x = images(*size)
    with torch.no_grad():
        expected = dinov2_reference_features(teacher, x)
        out = model.forward_features(x)
        timm_out = teacher.forward_features(x)
    assert max_diff(out, expected) < ATOL
    assert max_diff(timm_out, expected) > 1e-3  # timm's convention is a different function here


def test_dinov2_interp_modes_agree_at_native_grid(tmp_path):
    teacher = timm_teacher('vit_small_patch14_dinov2', depth=2)
    ckpt = save_state(teacher, tmp_path / 't.pth')
    x = images(14 * DINOV2_NATIVE_GRID, 14 * DINOV2_NATIVE_GRID, batch=1)
    outputs = {}
    with torch.no_grad():
        for mode in ('dinov2', 'timm'):
            model = JetViT('dinov2_vits14', checkpoint=ckpt, depth=2, pos_embed_interp=mode, **TINY).eval()
            outputs[mode] = model.forward_features(x)
        expected = dinov2_reference_features(teacher, x)
        timm_out = teacher.forward_features(x)
    assert torch.equal(outputs['dinov2'], outputs['timm'])
    assert max_diff(outputs['dinov2'], expected) < ATOL
    assert max_diff(outputs['dinov2'], timm_out) < ATOL


# -------------------------------------------------------------------- 4. teacher weights in a hybrid JetViT
def expected_jetvit_state(timm_state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """What JetViT should hold for a timm teacher: ViT names kept, Eva's gamma_i -> ls{i}.gamma, q/v -> qkv.bias."""
    out = {}
    for key, value in timm_state.items():
        if key.endswith(('attn.k_bias', 'attn.v_bias')):
            continue
        if key.endswith('attn.q_bias'):
            v_bias = timm_state[key[:-len('q_bias')] + 'v_bias']
            out[key[:-len('q_bias')] + 'qkv.bias'] = torch.cat([value, torch.zeros_like(value), v_bias])
            continue
        for i in (1, 2):
            if key.endswith(f'.gamma_{i}'):
                key = key[:-len(f'gamma_{i}')] + f'ls{i}.gamma'
        out[key] = value
    return out


HYBRID_CASES = [
    ('dinov3_vits16', 'vit_small_patch16_dinov3_qkvb', {'qkv_bias': True}, 'squeeze'),
    ('dinov3_vits16', 'vit_small_patch16_dinov3', {}, 'static'),
    ('dinov2_vits14', 'vit_small_patch14_dinov2', {}, 'squeeze'),
]


@pytest.mark.parametrize('model_name,timm_name,kwargs,conv', HYBRID_CASES, ids=[f'{c[1]}-{c[3]}' for c in HYBRID_CASES])
def test_hybrid_arch_keeps_every_teacher_weight(tmp_path, model_name, timm_name, kwargs, conv):
    teacher = timm_teacher(timm_name, depth=4)
    expected = expected_jetvit_state(teacher.state_dict())
    model = JetViT(model_name, arch='LWLF', checkpoint=save_state(teacher, tmp_path / 't.pth'), depth=4,
                   mixers=default_mixers(L={'conv': conv}), **TINY, **kwargs)
    state = model.state_dict()
    for key, value in expected.items():
        assert key in state, f'teacher weight {key} missing from the student'
        assert torch.equal(state[key], value), key
    # the one buffer: DINOv3's RoPE periods (kept from checkpoints that hold them; here timm's computed ones)
    rope = {'rope.periods'} if model_name.startswith('dinov3') else set()
    assert all(torch.equal(state[k], teacher.rope.periods) for k in rope)
    # and the arch spec, so that no load can take these weights for another arch
    assert ArchSpec.from_tensor(state[SPEC_KEY]) == model.spec and model.spec.arch == 'LWLF'
    extra = sorted(set(state) - set(expected) - rope - {SPEC_KEY})
    assert extra == sorted(model.new_parameter_names())
    assert extra and all(k.startswith(('blocks.0.attn.conv.', 'blocks.2.attn.conv.')) for k in extra)
    assert {k.split('.')[1] for k in extra} == {'0', '2'}  # both L layers, nothing from the W / F ones
    assert set(dict(model.named_parameters())) == set(state) - rope - {SPEC_KEY}  # no other buffers


def test_inherit_mlp_reinitialises_only_non_full_attention(tmp_path):
    teacher = timm_teacher('vit_small_patch16_dinov3_qkvb', depth=4)
    expected = expected_jetvit_state(teacher.state_dict())
    model = JetViT('dinov3_vits16', arch='LWLF', inherit='mlp', checkpoint=save_state(teacher, tmp_path / 't.pth'),
                   depth=4, qkv_bias=True, **TINY)
    state = model.state_dict()
    changed = sorted(k for k, v in expected.items() if not torch.equal(state[k], v))
    assert changed == sorted(f'blocks.{i}.attn.{layer}.{p}' for i in (0, 1, 2) for layer in ('qkv', 'proj')
                             for p in ('weight', 'bias'))
    for i in (0, 1, 2):
        weight = state[f'blocks.{i}.attn.qkv.weight']
        assert 0.01 < weight.std() < 0.03  # trunc-normal(0.02), not the teacher's fan-in scale (0.125)
        assert not state[f'blocks.{i}.attn.qkv.bias'].any() and not state[f'blocks.{i}.attn.proj.bias'].any()


def test_frozen_model_has_no_gradients_and_stays_in_eval(tmp_path):
    model = JetViT('dinov3_vits16', arch='LWF', depth=3, frozen=True, **TINY)
    assert not any(p.requires_grad for p in model.parameters())
    assert not model.training
    model.train()
    assert not any(m.training for m in model.modules())
    unfrozen = JetViT('dinov3_vits16', arch='LWF', depth=3, **TINY).train()
    assert all(p.requires_grad for p in unfrozen.parameters()) and unfrozen.blocks[0].training


# ----------------------------------------------------------------------------------------- 6. output contract
@pytest.mark.parametrize('model_name,num_prefix,patch', [('dinov3_vits16', 5, 16), ('dinov2_vits14', 1, 14)])
def test_forward_and_intermediates_contract(model_name, num_prefix, patch):
    model = randomise_(JetViT(model_name, arch='LWF', depth=3,
                              mixers=default_mixers(W=dict(window_size=2)), out_indices=(-1, 0), **TINY), 0).eval()
    assert model.out_indices == (2, 0)
    grid = (2, 3)
    x = images(patch * grid[0], patch * grid[1])
    with torch.no_grad():
        maps = model(x)
        feats = model.forward_features(x)
        nlc = model.forward_intermediates(x, indices=[2, 0], output_fmt='NLC', return_prefix_tokens=True)
        raw = model.forward_intermediates(x, indices=[-1], norm=False, output_fmt='NLC')
    assert isinstance(maps, tuple) and len(maps) == 2
    assert all(m.shape == (2, 64, *grid) for m in maps)
    assert torch.equal(maps[0], tokens_to_map(feats, num_prefix, grid))
    assert not torch.allclose(maps[0], maps[1], atol=1e-2)  # (2, 0) order respected: layer 2 first
    assert len(nlc) == 2
    for (patches, prefix), chw in zip(nlc, maps):
        assert patches.shape == (2, grid[0] * grid[1], 64) and prefix.shape == (2, num_prefix, 64)
        assert torch.equal(patches.transpose(1, 2).reshape(2, 64, *grid), chw)
    assert torch.equal(torch.cat([nlc[0][1], nlc[0][0]], dim=1), feats)
    assert raw[0].shape == (2, grid[0] * grid[1], 64)
    assert max_diff(model.norm(torch.cat([torch.zeros(2, num_prefix, 64), raw[0]], 1))[:, num_prefix:],
                    nlc[0][0]) < ATOL
    assert max_diff(raw[0], nlc[0][0]) > 1e-2  # norm=False really skips the final norm
    with pytest.raises(ValueError, match='out of range'):
        JetViT(model_name, depth=3, out_indices=(-4, ), **TINY)
    assert JetViT(model_name, depth=3, out_indices=-1, **TINY).out_indices == (2, )  # one int: one layer, as mmseg
    for bad in ((), [], (True, ), (1.0, ), '12'):
        with pytest.raises(ValueError, match='out_indices'):
            JetViT(model_name, depth=3, out_indices=bad, **TINY)
    with pytest.raises(ValueError, match='out_indices'):
        model.forward_intermediates(x, indices=())
    with pytest.raises(ValueError, match=r'expected 3-channel images \[B, 3, H, W\], got shape \(2, 1, '):
        model(x[:, :1])
    with pytest.raises(ValueError, match='NHWC'):
        model.forward_intermediates(x, output_fmt='NHWC')


def test_default_out_indices():
    assert JetViT('dinov3_vits16', **TINY).out_indices == (11, )
    assert JetViT('dinov3_vits16', depth=3, **TINY).out_indices == (2, )
    dinov2 = JetViT('dinov2_vits14', **TINY).eval()
    assert dinov2.out_indices == (2, 5, 8, 11)
    with torch.no_grad():
        maps = dinov2(images(28, 42, batch=1))
    assert len(maps) == 4 and all(m.shape == (1, 64, 2, 3) for m in maps)
    assert VARIANTS['dinov2_vitl14'].default_out_indices == (4, 11, 17, 23)
    assert VARIANTS['dinov2_vitb14'].default_out_indices == (2, 5, 8, 11)
    assert VARIANTS['dinov3_vitl16'].default_out_indices == (23, )


def test_default_out_indices_do_not_depend_on_restating_the_depth():
    """JetViT('dinov2_vits14') and JetViT('dinov2_vits14', depth=12) are the same model: same tapped layers."""
    assert JetViT('dinov2_vits14', depth=12, **TINY).out_indices == JetViT('dinov2_vits14', **TINY).out_indices


ARCHS = ['FFF', 'WWW', 'LLL', 'LWF', 'FLW']


@pytest.mark.parametrize('model_name,patch', [('dinov3_vits16', 16), ('dinov2_vits14', 14)])
@pytest.mark.parametrize('arch', ARCHS)
def test_every_arch_runs_forward_and_backward_on_odd_grid(model_name, patch, arch):
    torch.manual_seed(0)
    model = JetViT(model_name, arch=arch, depth=3,
                   mixers=default_mixers(W=dict(window_size=2)), out_indices=(1, 2), **TINY).train()
    x = images(3 * patch, 5 * patch)  # grid 3 x 5: non-square, not a multiple of the window
    maps = model(x)
    assert [m.shape for m in maps] == [(2, 64, 3, 5)] * 2
    assert all(torch.isfinite(m).all() for m in maps)
    sum(m.square().mean() for m in maps).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, f'{name} got no gradient'
        assert torch.isfinite(p.grad).all(), name
    assert model.patch_embed.proj.weight.grad.abs().sum() > 0 and model.cls_token.grad.abs().sum() > 0
    # images do not leak into each other (window padding, squeezed conv kernels are per image)
    model.eval()
    with torch.no_grad():
        batched = model(x)[0]
        single = torch.cat([model(x[i:i + 1])[0] for i in range(2)])
    assert max_diff(batched, single) < ATOL


def test_window_covering_the_grid_equals_full_attention(tmp_path):
    teacher = timm_teacher('vit_small_patch16_dinov3_qkvb', depth=2)
    ckpt = save_state(teacher, tmp_path / 't.pth')
    full = JetViT('dinov3_vits16', arch='FF', checkpoint=ckpt, depth=2, qkv_bias=True, **TINY).eval()
    window = JetViT('dinov3_vits16', arch='WW', checkpoint=ckpt, depth=2, qkv_bias=True,
                    mixers=default_mixers(W=dict(window_size=16)),
                    **TINY).eval()
    small_window = JetViT('dinov3_vits16', arch='WW', checkpoint=ckpt, depth=2, qkv_bias=True,
                          mixers=default_mixers(W=dict(window_size=2)),
                          **TINY).eval()
    x = images(48, 80)
    with torch.no_grad():
        ref = full.forward_features(x)
        assert max_diff(window.forward_features(x), ref) < ATOL
        assert max_diff(small_window.forward_features(x), ref) > 1e-3


# ------------------------------------------------------------------------------------ 5. errors (arguments)
def test_arch_of_wrong_length_is_refused():
    with pytest.raises(ValueError, match=r"'LF' has 2 letters.*3"):
        JetViT('dinov3_vits16', arch='LF', depth=3, **TINY)


def test_arch_with_bad_letter_is_refused():
    with pytest.raises(ValueError) as info:
        JetViT('dinov3_vits16', arch='LXF', depth=3, **TINY)
    message = str(info.value)
    assert "'X' at layer 1" in message and all(f"'{c}'" in message for c in 'FLW')


def test_unknown_model_name_lists_valid_names():
    with pytest.raises(ValueError) as info:
        JetViT('dinov3_vitx16')
    message = str(info.value)
    assert 'dinov3_vitx16' in message
    for name in ('dinov3_vits16', 'dinov3_vits16plus', 'dinov3_vitb16', 'dinov3_vitl16', 'dinov3_vith16plus',
                 'dinov2_vits14', 'dinov2_vitb14', 'dinov2_vitl14'):
        assert name in message


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match='all, mlp'):
        JetViT('dinov3_vits16', depth=2, inherit='qkv', **TINY)
    with pytest.raises(ValueError, match='dinov2, timm'):
        JetViT('dinov2_vits14', depth=2, pos_embed_interp='bilinear', **TINY)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['mixers.L.kernel_sizes'\]"):
        JetViT('dinov3_vits16', arch='FF', depth=2, mixers=default_mixers(L={'kernel_sizes': 3}), **TINY)
    # 'kernel' is the L implementation switch (issue 20): a kernel size given there is refused by name
    with pytest.raises(ValueError, match="unknown mixers.L.kernel 3; valid: 'auto', 'torch', 'compile', 'triton'"):
        JetViT('dinov3_vits16', arch='FF', depth=2, mixers=default_mixers(L={'kernel': 3}), **TINY)
    with pytest.raises(ValueError, match="unknown mixers.W.kernel 'fast'"):
        JetViT('dinov3_vits16', arch='FF', depth=2, mixers=default_mixers(W={'kernel': 'fast'}), **TINY)


@pytest.mark.parametrize('model_name,size,patch', [('dinov3_vits16', (33, 48), 16), ('dinov2_vits14', (28, 40), 14)])
def test_input_not_multiple_of_patch_size(model_name, size, patch):
    model = JetViT(model_name, depth=2, **TINY)
    with pytest.raises(ValueError, match=rf'{size[0]}x{size[1]} is not a multiple of the patch size {patch}'):
        model(images(*size))


def test_rope_embed_is_cached_outside_training_and_equals_a_fresh_one():
    model = JetViT('dinov3_vits16', arch='LWF', depth=3, **TINY).eval()
    grid = (3, 5)
    first = model.rope_embed(grid)
    assert model.rope_embed(grid) is first  # no new host-to-device copy per forward (and CUDA-graph capturable)
    torch.testing.assert_close(first, model.rope.get_embed(shape=grid), rtol=0, atol=0)
    assert model.rope_embed((5, 3)).shape == first.shape and not torch.equal(model.rope_embed((5, 3)), first)
    model.train()
    assert model.rope_embed(grid) is not first  # training builds a fresh one (timm may augment coordinates)
    model.eval()
    cached = model.rope_embed(grid)
    with torch.no_grad():
        model.rope.periods.mul_(2)
    model.load_state_dict(model.state_dict())  # loading weights drops the cache
    assert not torch.equal(model.rope_embed(grid), cached)


def test_mixed_l_precision_trains_under_bf16_autocast_like_the_fp32_core():
    """A distillation step under bf16 autocast: with ``precision='mixed'`` the L layers' gradients are as close to
    the fp32 step's as with the fp32 core (bf16 autocast of the Linears dominates both errors)."""
    torch.manual_seed(0)
    kw = dict(model_name='dinov3_vits16', depth=4, mixers=default_mixers(W=dict(window_size=4)), **TINY)
    teacher = JetViT(arch='FFFF', **kw).eval()
    with torch.no_grad():
        for block in teacher.blocks:  # attention that matters: LayerScale 1, peaky q/k
            block.ls1.gamma.fill_(1.0)
            block.ls2.gamma.fill_(1.0)
            block.attn.qkv.weight.normal_(0, 2 / 8)
    x = torch.randn(2, 3, 64, 128)
    with torch.no_grad():
        target = teacher.forward_features(x)

    def grads(precision: str, autocast: bool) -> Tuple[float, torch.Tensor]:
        student = JetViT(arch='LLWL', **dict(kw, mixers=default_mixers(W=dict(window_size=4),
                                                                       L=dict(conv='squeeze', precision=precision))))
        apply_checkpoint(student, teacher.state_dict())
        with torch.autocast('cpu', dtype=torch.bfloat16, enabled=autocast):
            loss = F.mse_loss(student.forward_features(x).float(), target)
        loss.backward()
        return loss.item(), torch.cat([p.grad.flatten() for p in student.parameters() if p.grad is not None])

    ref_loss, ref = grads('fp32', autocast=False)
    errors = {}
    for precision in ('fp32', 'mixed'):
        loss, g = grads(precision, autocast=True)
        assert loss == pytest.approx(ref_loss, rel=0.02)
        errors[precision] = ((g - ref).norm() / ref.norm()).item()
    assert ref.norm() > 0 and errors['fp32'] < 0.3
    assert errors['mixed'] < 1.25 * errors['fp32'], errors
