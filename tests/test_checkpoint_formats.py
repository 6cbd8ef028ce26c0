"""Checkpoint formats: one set of weights written as official DINOv3, timm (.pth / .safetensors), Hugging Face
(a real ``DINOv3ViTModel``) and DepthAnythingV2 files loads into JetViT to identical outputs; load errors are clear.

Every file is produced here from one tiny randomised model; the official and DepthAnythingV2 files are written by
inverse mappings kept in this file, independent of the converters under test.
"""
import pathlib
import pickle
from pathlib import Path
from typing import Dict

import pytest
import timm
import torch
from safetensors.torch import save_file
from transformers import Dinov2Config, Dinov2Model, DINOv3ViTConfig, DINOv3ViTModel

from jetvit_mm.models.arch import SPEC_KEY
from jetvit_mm.models.checkpoint import depth_head_state, read
from jetvit_mm.models.jetvit import JetViT
from jetvit_mm.models.mixers import default_mixers

StateDict = Dict[str, torch.Tensor]
TINY = dict(embed_dim=64, num_heads=4)
DEPTH = 2
ATOL = 1e-5
HF_HEADS = 4


# ---------------------------------------------------------------------------------------------------- helpers
@torch.no_grad()
def randomise_(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Give every parameter a non-trivial random value (biases and LayerScale included)."""
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


def timm_teacher(timm_name: str, depth: int = DEPTH, seed: int = 0, **kwargs) -> torch.nn.Module:
    model = timm.create_model(timm_name, pretrained=False, num_classes=0, dynamic_img_size=True, depth=depth,
                              **{**TINY, **kwargs})
    return randomise_(model, seed).eval()


def images(height: int = 32, width: int = 48, batch: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, 3, height, width, generator=torch.Generator().manual_seed(seed))


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return (a - b).abs().max().item()


def _noise(shape, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def official_qkv_bias(q: torch.Tensor, v: torch.Tensor, seed: int) -> Dict[str, torch.Tensor]:
    """The official masked bias: a K part holding garbage (the mask zeroes it) and a (1, 0, 1) mask."""
    mask = torch.cat([torch.ones_like(q), torch.zeros_like(q), torch.ones_like(v)])
    return {'bias': torch.cat([q, _noise(q.shape, seed), v]), 'bias_mask': mask}


def dinov3_periods(head_dim: int, bf16: bool = False) -> torch.Tensor:
    """DINOv3's RoPE periods (base 100, head_dim / 4 of them) as timm computes them in fp32; ``bf16``: rounded to
    bf16 and stored so, as in the official files (REFERENCE trap 2)."""
    periods = 100.0 ** (2.0 * torch.arange(head_dim // 4, dtype=torch.float32) / (head_dim // 2))
    return periods.bfloat16() if bf16 else periods


def timm_eva_to_official(state: StateDict, periods: torch.Tensor) -> StateDict:
    """timm DINOv3 (``_qkvb`` or plain) -> facebookresearch/dinov3 names, with the extras the official file has
    (``periods``: the RoPE periods to store)."""
    swiglu = any('.mlp.fc1_g.' in k for k in state)
    dim = state['cls_token'].shape[-1]
    out = {}
    for key, value in state.items():
        if key.endswith(('attn.q_bias', 'attn.v_bias', 'attn.k_bias')):
            continue
        if key.endswith('attn.qkv.weight'):
            prefix = key[:-len('weight')]
            q = state.get(prefix[:-len('qkv.')] + 'q_bias', torch.zeros(dim))
            v = state.get(prefix[:-len('qkv.')] + 'v_bias', torch.zeros(dim))
            for name, tensor in official_qkv_bias(q, v, seed=len(out)).items():
                out[prefix + name] = tensor
        key = key.replace('reg_token', 'storage_tokens').replace('.gamma_1', '.ls1.gamma')
        key = key.replace('.gamma_2', '.ls2.gamma')
        if swiglu:
            key = key.replace('.mlp.fc1_g.', '.mlp.w1.').replace('.mlp.fc1_x.', '.mlp.w2.')
            key = key.replace('.mlp.fc2.', '.mlp.w3.')
        out[key] = value
    out['mask_token'] = _noise((1, dim), 7)
    out['rope_embed.periods'] = periods
    out['local_cls_norm.weight'], out['local_cls_norm.bias'] = torch.ones(dim), torch.zeros(dim)
    return out


def hf_to_official(state: StateDict) -> StateDict:
    """Hugging Face ``DINOv3ViTModel`` -> facebookresearch/dinov3 names."""
    gated = any('.mlp.gate_proj.' in k for k in state)
    mlp = {'gate_proj': 'w1', 'up_proj': 'w2', 'down_proj': 'w3'} if gated else {'up_proj': 'fc1', 'down_proj': 'fc2'}
    out = {'cls_token': state['embeddings.cls_token'], 'storage_tokens': state['embeddings.register_tokens'],
           'mask_token': state['embeddings.mask_token'][0],
           'patch_embed.proj.weight': state['embeddings.patch_embeddings.weight'],
           'patch_embed.proj.bias': state['embeddings.patch_embeddings.bias'],
           'norm.weight': state['norm.weight'], 'norm.bias': state['norm.bias'],
           'rope_embed.periods': dinov3_periods(state['embeddings.cls_token'].shape[-1] // HF_HEADS)}
    layers = sorted({int(k.split('.')[1]) for k in state if k.startswith('layer.')})
    for i in layers:
        src, dst = f'layer.{i}.', f'blocks.{i}.'
        out[dst + 'attn.qkv.weight'] = torch.cat([state[f'{src}attention.{p}_proj.weight'] for p in 'qkv'])
        for name, tensor in official_qkv_bias(state[src + 'attention.q_proj.bias'],
                                              state[src + 'attention.v_proj.bias'], seed=i).items():
            out[dst + 'attn.qkv.' + name] = tensor
        for p in ('weight', 'bias'):
            out[f'{dst}attn.proj.{p}'] = state[f'{src}attention.o_proj.{p}']
            for norm in ('norm1', 'norm2'):
                out[f'{dst}{norm}.{p}'] = state[f'{src}{norm}.{p}']
            for hf_name, name in mlp.items():
                out[f'{dst}mlp.{name}.{p}'] = state[f'{src}mlp.{hf_name}.{p}']
        for j in (1, 2):
            out[f'{dst}ls{j}.gamma'] = state[f'{src}layer_scale{j}.lambda1']
    return out


def jetvit(model_name: str = 'dinov3_vits16', **kwargs) -> JetViT:
    return JetViT(model_name, depth=kwargs.pop('depth', DEPTH), **{**TINY, **kwargs}).eval()


def features(model: JetViT, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.forward_features(x)


# -------------------------------------------------------------------- 2. DINOv3: official == timm == HF
# (JetViT model_name, timm reference with q/v biases)
DINOV3_CASES = [('dinov3_vits16', 'vit_small_patch16_dinov3_qkvb'),
                ('dinov3_vits16plus', 'vit_small_plus_patch16_dinov3_qkvb')]


@pytest.mark.parametrize('model_name,timm_name', DINOV3_CASES, ids=[c[0] for c in DINOV3_CASES])
def test_official_and_timm_files_load_to_identical_outputs(tmp_path, model_name, timm_name):
    teacher = timm_teacher(timm_name)
    state = teacher.state_dict()
    official = timm_eva_to_official(state, dinov3_periods(TINY['embed_dim'] // TINY['num_heads']))
    assert any(k.endswith('.mlp.w1.weight') for k in official) == model_name.endswith('plus')
    torch.save(state, tmp_path / 'timm.pth')
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / 'timm.safetensors'))
    torch.save(official, tmp_path / 'dinov3_vits16_pretrain_lvd1689m-0000.pth')
    files = {'timm.pth': 'timm_eva', 'timm.safetensors': 'timm_eva',
             'dinov3_vits16_pretrain_lvd1689m-0000.pth': 'dinov3_official'}
    x = images(32, 80)
    with torch.no_grad():
        expected = teacher.forward_features(x)
    outputs, states = {}, {}
    for name, fmt in files.items():
        model = jetvit(model_name, qkv_bias=True)
        assert model.load_checkpoint(tmp_path / name) == fmt
        outputs[name], states[name] = features(model, x), model.state_dict()
    reference = outputs['timm.pth']
    assert max_diff(reference, expected) < ATOL
    for name in files:
        assert states[name].keys() == states['timm.pth'].keys()
        assert all(torch.equal(v, states['timm.pth'][k]) for k, v in states[name].items()), name
        assert torch.equal(outputs[name], reference), name
    # the K bias garbage in the official file matters (RoPE makes a K bias visible), so the mask is really applied
    leaky = jetvit(model_name, qkv_bias=True, checkpoint=tmp_path / 'timm.pth')
    with torch.no_grad():
        for i in range(DEPTH):
            leaky.blocks[i].attn.qkv.bias.copy_(official[f'blocks.{i}.attn.qkv.bias'])
    assert max_diff(features(leaky, x), reference) > 1e-4


def test_official_bf16_rope_periods_are_used_and_kept(tmp_path):
    """Official files store RoPE periods rounded to bf16 and the official model computes with them (REFERENCE trap
    2): JetViT uses them (= timm with its periods replaced), keeps them through its own files and dtype casts;
    ``rope_periods='computed'`` ignores them (= timm)."""
    teacher = timm_teacher('vit_small_patch16_dinov3_qkvb')
    stored = dinov3_periods(TINY['embed_dim'] // TINY['num_heads'], bf16=True)
    assert not torch.equal(stored.float(), teacher.rope.periods)  # the rounding is visible at this size
    torch.save(timm_eva_to_official(teacher.state_dict(), stored), tmp_path / 'official.pth')
    x = images(32, 80)
    with torch.no_grad():
        computed = teacher.forward_features(x)
        teacher.rope.periods.copy_(stored.float())
        official = teacher.forward_features(x)
    assert max_diff(official, computed) > 1e-5

    model = jetvit(qkv_bias=True, checkpoint=tmp_path / 'official.pth')
    assert torch.equal(model.rope.periods, stored.float()) and model.rope.periods.dtype == torch.float32
    assert max_diff(features(model, x), official) < ATOL
    assert max_diff(features(jetvit(qkv_bias=True, rope_periods='computed', checkpoint=tmp_path / 'official.pth'),
                             x), computed) < ATOL
    # JetViT's own file (an export, a fine-tuned student) carries them; casts keep them
    torch.save(model.state_dict(), tmp_path / 'jetvit.pth')
    again = jetvit(arch='LW', qkv_bias=True, checkpoint=tmp_path / 'jetvit.pth')
    assert torch.equal(again.rope.periods, stored.float())
    again.to(torch.bfloat16)
    assert torch.equal(again.rope.periods, stored.float()) and 'rope.periods' in again.state_dict()
    with pytest.raises(ValueError, match="unknown rope_periods 'bf16'; valid: checkpoint, computed"):
        jetvit(rope_periods='bf16')


@pytest.fixture(scope='module', params=[False, True], ids=['mlp', 'gated'])
def hf_model(request, tmp_path_factory):
    """A real, randomised Hugging Face DINOv3ViTModel saved with save_pretrained: (model, model.safetensors)."""
    gated = request.param
    config = DINOv3ViTConfig(hidden_size=64, num_hidden_layers=DEPTH, num_attention_heads=HF_HEADS,
                             intermediate_size=256, patch_size=16, num_register_tokens=4, use_gated_mlp=gated,
                             hidden_act='silu' if gated else 'gelu')
    model = randomise_(DINOv3ViTModel(config), seed=3).eval()
    folder = tmp_path_factory.mktemp('hf_gated' if gated else 'hf')
    model.save_pretrained(folder)
    return model, folder / 'model.safetensors'


def test_hf_checkpoint_matches_hf_model(hf_model):
    hf, path = hf_model
    model_name = 'dinov3_vits16plus' if hf.config.use_gated_mlp else 'dinov3_vits16'
    model = jetvit(model_name, qkv_bias=True)
    assert model.load_checkpoint(path) == 'hf_dinov3'
    for size in [(48, 48), (32, 80)]:
        x = images(*size)
        with torch.no_grad():
            expected = hf(pixel_values=x).last_hidden_state
        assert expected.shape == (2, 5 + size[0] * size[1] // 256, 64) and expected.std() > 0.3
        assert max_diff(features(model, x), expected) < ATOL


def test_hf_and_official_files_of_same_weights_agree(hf_model, tmp_path):
    hf, path = hf_model
    model_name = 'dinov3_vits16plus' if hf.config.use_gated_mlp else 'dinov3_vits16'
    torch.save(hf_to_official(read(path).state), tmp_path / 'official.pth')
    from_hf, from_official = jetvit(model_name, qkv_bias=True), jetvit(model_name, qkv_bias=True)
    assert from_hf.load_checkpoint(path) == 'hf_dinov3'
    assert from_official.load_checkpoint(tmp_path / 'official.pth') == 'dinov3_official'
    a, b = from_hf.state_dict(), from_official.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    x = images(32, 80)
    assert torch.equal(features(from_hf, x), features(from_official, x))


def test_hf_dinov2_files_match_hf_model(tmp_path):
    """A Hugging Face ``Dinov2Model`` file (hub names: attention.attention.query/key/value, attention.output.dense)
    and its in-memory state dict (recent transformers: attention.{q,k,v,o}_proj) load into JetViT and give the HF
    model's tokens: at the native 518 grid with any interpolation mode, elsewhere with ``pos_embed_interp='hf'``."""
    config = Dinov2Config(hidden_size=32, num_hidden_layers=DEPTH, num_attention_heads=2, intermediate_size=128,
                          patch_size=14, image_size=518, layerscale_value=0.7)
    hf = randomise_(Dinov2Model(config), seed=4).eval()
    hf.save_pretrained(tmp_path)
    hub = read(tmp_path / 'model.safetensors').state
    assert 'encoder.layer.0.attention.attention.query.weight' in hub and 'embeddings.position_embeddings' in hub
    torch.save(hf.state_dict(), tmp_path / 'in_memory.pth')
    for name in ('model.safetensors', 'in_memory.pth'):
        for interp, sizes in (('dinov2', [(518, 518)]), ('hf', [(518, 518), (70, 98), (266, 364)])):
            model = JetViT('dinov2_vits14', depth=DEPTH, embed_dim=32, num_heads=2, pos_embed_interp=interp).eval()
            assert model.load_checkpoint(tmp_path / name) == 'hf_dinov2'
            for size in sizes:
                x = images(*size, batch=1)
                with torch.no_grad():
                    expected = hf(pixel_values=x).last_hidden_state
                assert max_diff(features(model, x), expected) < ATOL, (name, interp, size)


def test_jetvit_state_dict_round_trip(tmp_path):
    """JetViT's own files ('vit' format) keep the L mixers' new parameters too."""
    source = randomise_(jetvit(arch='LW', mixers=default_mixers(L={'conv': 'squeeze'})), seed=5)
    torch.save(source.state_dict(), tmp_path / 'jetvit.pth')
    copy = jetvit(arch='LW', mixers=default_mixers(L={'conv': 'squeeze'}))
    assert copy.load_checkpoint(tmp_path / 'jetvit.pth') == 'vit'
    assert all(torch.equal(v, source.state_dict()[k]) for k, v in copy.state_dict().items())
    x = images(48, 48)
    assert torch.equal(features(copy, x), features(source, x))


def test_wrapped_and_ddp_prefixed_checkpoints_load(tmp_path):
    teacher = timm_teacher('vit_small_patch16_dinov3')
    torch.save({'state_dict': {'module.' + k: v for k, v in teacher.state_dict().items()}, 'meta': {}},
               tmp_path / 'wrapped.pth')
    model = jetvit()
    assert model.load_checkpoint(tmp_path / 'wrapped.pth') == 'timm_eva'
    x = images()
    with torch.no_grad():
        assert max_diff(features(model, x), teacher.forward_features(x)) < ATOL


# ------------------------------------------------------------------------------------ 3. DepthAnythingV2
def depth_anything_checkpoint(teacher: torch.nn.Module) -> StateDict:
    """A DepthAnythingV2 file: the official DINOv2 backbone (== timm names) under pretrained., plus a DPT head."""
    dim = teacher.embed_dim
    state = {f'pretrained.{k}': v for k, v in teacher.state_dict().items()}
    state['pretrained.mask_token'] = _noise((1, dim), 11)
    state.update({
        'depth_head.projects.0.weight': _noise((48, dim, 1, 1), 12),
        'depth_head.projects.0.bias': _noise((48, ), 13),
        'depth_head.resize_layers.0.weight': _noise((48, 48, 4, 4), 14),
        'depth_head.scratch.layer1_rn.weight': _noise((64, 48, 3, 3), 15),
        'depth_head.scratch.output_conv2.2.weight': _noise((1, 32, 1, 1), 16),
    })
    return state


def test_depth_anything_v2_backbone_loads_strictly(tmp_path):
    teacher = timm_teacher('vit_small_patch14_dinov2')
    state = depth_anything_checkpoint(teacher)
    torch.save(state, tmp_path / 'depth_anything_v2_vits.pth')
    model = jetvit('dinov2_vits14', pos_embed_interp='timm')
    assert model.load_checkpoint(tmp_path / 'depth_anything_v2_vits.pth') == 'depth_anything_v2'
    teacher_state = teacher.state_dict()
    own = model.state_dict()
    assert set(own) == set(teacher_state) | {SPEC_KEY}  # the teacher's weights and the model's arch spec
    assert all(torch.equal(own[k], v) for k, v in teacher_state.items())
    x = images(28, 70)
    with torch.no_grad():
        assert max_diff(features(model, x), teacher.forward_features(x)) < ATOL
    # the same backbone as a plain DINOv2 file gives the very same model
    torch.save(teacher_state, tmp_path / 'dinov2.pth')
    plain = jetvit('dinov2_vits14', pos_embed_interp='timm')
    assert plain.load_checkpoint(tmp_path / 'dinov2.pth') == 'vit'
    assert torch.equal(features(plain, x), features(model, x))
    # the head part
    head = depth_head_state(read(tmp_path / 'depth_anything_v2_vits.pth').state)
    expected_head = {k[len('depth_head.'):]: v for k, v in state.items() if k.startswith('depth_head.')}
    assert head.keys() == expected_head.keys() and all(torch.equal(head[k], v) for k, v in expected_head.items())
    with pytest.raises(ValueError, match='depth_head'):
        depth_head_state(teacher_state)


def test_depth_anything_v2_backbone_is_strict(tmp_path):
    state = depth_anything_checkpoint(timm_teacher('vit_small_patch14_dinov2'))
    missing = {k: v for k, v in state.items() if k != 'pretrained.blocks.1.ls2.gamma'}
    torch.save(missing, tmp_path / 'missing.pth')
    with pytest.raises(RuntimeError, match=r'missing keys: blocks\.1\.ls2\.gamma'):
        jetvit('dinov2_vits14').load_checkpoint(tmp_path / 'missing.pth')
    torch.save({**state, 'pretrained.blocks.0.attn.q_norm.weight': torch.ones(16)}, tmp_path / 'extra.pth')
    with pytest.raises(RuntimeError, match=r'unexpected keys: blocks\.0\.attn\.q_norm\.weight'):
        jetvit('dinov2_vits14').load_checkpoint(tmp_path / 'extra.pth')


# ------------------------------------------------------------------------------------ 5. load errors
@pytest.fixture(scope='module')
def qkvb_teacher():
    return timm_teacher('vit_small_patch16_dinov3_qkvb')


def test_missing_key_is_named(tmp_path, qkvb_teacher):
    state = {k: v for k, v in qkvb_teacher.state_dict().items() if k != 'blocks.1.norm2.bias'}
    torch.save(state, tmp_path / 'ckpt.pth')
    with pytest.raises(RuntimeError) as info:
        jetvit(qkv_bias=True, checkpoint=tmp_path / 'ckpt.pth')
    message = str(info.value)
    assert 'missing keys: blocks.1.norm2.bias' in message and 'unexpected' not in message
    assert 'ckpt.pth' in message


def test_unexpected_key_is_named(tmp_path, qkvb_teacher):
    state = {**qkvb_teacher.state_dict(), 'blocks.0.attn.extra.weight': torch.ones(3)}
    torch.save(state, tmp_path / 'ckpt.pth')
    with pytest.raises(RuntimeError) as info:
        jetvit(qkv_bias=True, checkpoint=tmp_path / 'ckpt.pth')
    message = str(info.value)
    assert 'unexpected keys: blocks.0.attn.extra.weight' in message and 'missing' not in message


def test_checkpoint_of_other_size_reports_shapes(tmp_path):
    torch.save(timm_teacher('vit_small_patch16_dinov3', embed_dim=96).state_dict(), tmp_path / 'wide.pth')
    with pytest.raises(RuntimeError) as info:
        jetvit(checkpoint=tmp_path / 'wide.pth')
    message = str(info.value)
    assert 'shape mismatches' in message
    assert 'blocks.0.attn.qkv.weight: checkpoint (288, 96) vs model (192, 64)' in message
    assert '(32 in all)' in message and 'embed_dim=64' in message and 'missing' not in message


@pytest.mark.parametrize('timm_name,model_name', [('vit_small_patch14_dinov2', 'dinov2_vits14'),
                                                  ('vit_small_patch16_dinov3_qkvb', 'dinov3_vits16')])
def test_checkpoint_of_deeper_model_lists_extra_layers(tmp_path, timm_name, model_name):
    """A 3-layer checkpoint into a 2-layer model with qkv bias: the error is about the extra layer's keys."""
    torch.save(timm_teacher(timm_name, depth=3).state_dict(), tmp_path / 'deep.pth')
    with pytest.raises(RuntimeError) as info:
        jetvit(model_name, qkv_bias=True, checkpoint=tmp_path / 'deep.pth')
    message = str(info.value)
    assert 'unexpected keys' in message and 'blocks.2.attn.qkv.bias' in message and 'blocks.2.norm1.weight' in message


def test_official_checkpoint_with_nan_bias_mask_is_refused(tmp_path, qkvb_teacher):
    official = timm_eva_to_official(qkvb_teacher.state_dict(), qkvb_teacher.rope.periods)
    official['blocks.1.attn.qkv.bias_mask'] = torch.full_like(official['blocks.1.attn.qkv.bias_mask'], float('nan'))
    torch.save(official, tmp_path / 'nan_mask.pth')
    with pytest.raises(ValueError, match=r'blocks\.1\.attn\.qkv\.bias_mask holds NaN'):
        jetvit(qkv_bias=True, checkpoint=tmp_path / 'nan_mask.pth')


def test_official_checkpoint_without_bias_mask_uses_the_official_mask(tmp_path, qkvb_teacher):
    official = timm_eva_to_official(qkvb_teacher.state_dict(), qkvb_teacher.rope.periods)
    torch.save(official, tmp_path / 'masked.pth')
    torch.save({k: v for k, v in official.items() if not k.endswith('bias_mask')}, tmp_path / 'unmasked.pth')
    x = images()
    masked = features(jetvit(qkv_bias=True, checkpoint=tmp_path / 'masked.pth'), x)
    unmasked = features(jetvit(qkv_bias=True, checkpoint=tmp_path / 'unmasked.pth'), x)
    assert torch.isfinite(unmasked).all()
    assert torch.equal(unmasked, masked)
    with torch.no_grad():
        assert max_diff(masked, qkvb_teacher.forward_features(x)) < ATOL


def test_nonzero_qkv_bias_needs_qkv_bias_model(tmp_path, qkvb_teacher):
    torch.save(timm_eva_to_official(qkvb_teacher.state_dict(), qkvb_teacher.rope.periods), tmp_path / 'official.pth')
    with pytest.raises(ValueError, match=r'blocks\.0\.attn\.qkv\.bias is non-zero.*qkv_bias=True'):
        jetvit(checkpoint=tmp_path / 'official.pth')
    torch.save(qkvb_teacher.state_dict(), tmp_path / 'timm.pth')
    with pytest.raises(ValueError, match='qkv_bias=True'):
        jetvit(checkpoint=tmp_path / 'timm.pth')


def test_zero_qkv_bias_loads_into_model_without_bias(tmp_path):
    """Official files always carry a qkv bias; all-zero q/v parts (garbage K masked away) load into qkv_bias=False."""
    teacher = timm_teacher('vit_small_patch16_dinov3')
    torch.save(timm_eva_to_official(teacher.state_dict(), teacher.rope.periods), tmp_path / 'official.pth')
    model = jetvit(checkpoint=tmp_path / 'official.pth')
    assert model.qkv_bias is False
    x = images()
    with torch.no_grad():
        assert max_diff(features(model, x), teacher.forward_features(x)) < ATOL


class _TouchOnLoad:
    """A pickle payload that would create ``marker`` when unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = pathlib.Path(marker)

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker, ))


def test_pickled_code_is_refused(tmp_path):
    marker = tmp_path / 'pwned'
    torch.save({'blocks.0.attn.qkv.weight': torch.ones(1), 'payload': _TouchOnLoad(marker)}, tmp_path / 'evil.pth')
    with pytest.raises(pickle.UnpicklingError):
        jetvit().load_checkpoint(tmp_path / 'evil.pth')
    assert not marker.exists()


def test_unreadable_inputs_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match='nope.pth'):
        jetvit().load_checkpoint(tmp_path / 'nope.pth')
    torch.save({'head.weight': torch.ones(2)}, tmp_path / 'other.pth')
    with pytest.raises(ValueError, match='unrecognised checkpoint format.*dinov3_official'):
        jetvit().load_checkpoint(tmp_path / 'other.pth')
