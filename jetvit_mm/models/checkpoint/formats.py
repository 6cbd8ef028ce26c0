"""Checkpoint formats -> JetViT's own names, one pure function per source format.

JetViT names (the teacher part): ``cls_token``, ``reg_token`` (DINOv3), ``pos_embed`` (DINOv2),
``patch_embed.proj.*``, ``blocks.{i}.{norm1, attn.qkv, attn.proj, ls1.gamma, norm2, mlp.*, ls2.gamma}``,
``norm.*``; MLPs as timm (``fc1``/``fc2``, SwiGLU ``fc1_g``/``fc1_x``/``fc2``).
"""
import re
from typing import Callable, Dict, Tuple

import torch

StateDict = Dict[str, torch.Tensor]


def strip_prefix(state: StateDict, prefix: str) -> StateDict:
    """The entries of ``state`` under ``prefix`` (``'backbone.'``, ``'module.'``, ...), with the prefix removed."""
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


def strip_wrapper_prefix(state: StateDict) -> StateDict:
    """``state`` without the ``module.`` prefix a DistributedDataParallel wrapper leaves on every key (as is when
    not every key has it)."""
    return strip_prefix(state, 'module.') if state and all(k.startswith('module.') for k in state) else state


def convert_dinov3_official(state: StateDict) -> StateDict:
    """facebookresearch/dinov3 ``.pth``: storage tokens, ``ls*.gamma``, masked qkv bias, SwiGLU ``w1/w2/w3``,
    RoPE ``periods`` (kept: REFERENCE trap 2)."""
    out = {}
    for key, value in state.items():
        if key in ('mask_token', ) or key.startswith('local_cls_norm.') or key.endswith('.bias_mask'):
            continue
        if key == 'rope_embed.periods':  # stored rounded to bf16: the official model computes with these values
            out['rope.periods'] = value.float()
            continue
        if key.endswith('attn.qkv.bias'):
            out[key] = _masked_qkv_bias(value, state.get(key + '_mask'), key)
            continue
        key = key.replace('storage_tokens', 'reg_token')
        key = re.sub(r'\.mlp\.w1\.', '.mlp.fc1_g.', key)
        key = re.sub(r'\.mlp\.w2\.', '.mlp.fc1_x.', key)
        key = re.sub(r'\.mlp\.w3\.', '.mlp.fc2.', key)
        out[key] = value
    return out


def _masked_qkv_bias(bias: torch.Tensor, mask, key: str) -> torch.Tensor:
    """The official qkv layer multiplies its bias by ``bias_mask`` (1 for q and v, 0 for k).

    A missing mask gets the official values; a mask holding NaN (its initial value, never overwritten)
    would turn every output into NaN, so it is an error.
    """
    if mask is None:
        mask = torch.ones_like(bias)
        dim = bias.shape[0] // 3
        mask[dim:2 * dim] = 0
    elif not torch.isfinite(mask).all():
        raise ValueError(f'{key}_mask holds NaN/Inf: this official DINOv3 checkpoint was saved with an '
                         'uninitialised bias_mask and would give NaN outputs')
    return bias * mask


def convert_timm_eva(state: StateDict) -> StateDict:
    """timm's DINOv3 (``Eva``): ``gamma_1/2`` LayerScale and separate ``q_bias``/``v_bias``."""
    out = {}
    for key, value in state.items():
        if key.endswith('attn.k_bias'):
            continue
        if key.endswith('attn.q_bias'):
            v_bias = state[key.replace('q_bias', 'v_bias')]
            out[key.replace('q_bias', 'qkv.bias')] = torch.cat([value, torch.zeros_like(value), v_bias])
            continue
        if key.endswith('attn.v_bias'):
            continue
        key = re.sub(r'\.gamma_([12])$', r'.ls\1.gamma', key)
        out[key] = value
    return out


def _rename(key: str, rules) -> str:
    """Apply ``(pattern, replacement)`` regex rules in order."""
    for pattern, repl in rules:
        key = re.sub(pattern, repl, key)
    return key


def convert_hf_dinov3(state: StateDict) -> StateDict:
    """Hugging Face ``DINOv3ViTModel``: ``embeddings.*``, ``[model.]layer.{i}.attention.{q,k,v,o}_proj``."""
    out = {}
    renames = [
        (r'^embeddings\.cls_token$', 'cls_token'),
        (r'^embeddings\.register_tokens$', 'reg_token'),
        (r'^embeddings\.patch_embeddings\.', 'patch_embed.proj.'),
        (r'^(?:model\.)?layer\.(\d+)\.', r'blocks.\1.'),
        (r'\.attention\.o_proj\.', '.attn.proj.'),
        (r'\.layer_scale([12])\.lambda1$', r'.ls\1.gamma'),
        (r'\.mlp\.gate_proj\.', '.mlp.fc1_g.'),
        (r'\.mlp\.down_proj\.', '.mlp.fc2.'),
    ]
    gated = any('.mlp.gate_proj.' in k for k in state)
    for key, value in state.items():
        if key == 'embeddings.mask_token' or re.search(r'\.attention\.[qkv]_proj\.', key):
            continue
        key = _rename(key, renames).replace('.mlp.up_proj.', '.mlp.fc1_x.' if gated else '.mlp.fc1.')
        out[key] = value
    for layer in sorted({int(m.group(1)) for k in state if (m := re.search(r'layer\.(\d+)\.attention\.q_proj', k))}):
        src = next(k for k in state if re.search(rf'(?:^|\.)layer\.{layer}\.attention\.q_proj\.weight$', k))
        src = src[:-len('q_proj.weight')]
        dst = f'blocks.{layer}.attn.qkv.'
        out[dst + 'weight'] = torch.cat([state[f'{src}{p}_proj.weight'] for p in 'qkv'])
        biases = [state.get(f'{src}{p}_proj.bias') for p in 'qkv']
        if any(b is not None for b in biases):
            dim = out[dst + 'weight'].shape[1]
            out[dst + 'bias'] = torch.cat([b if b is not None else torch.zeros(dim) for b in biases])
    return out


HF_DINOV2_QKV = r'encoder\.layer\.(\d+)\.attention\.(?:attention\.(query|key|value)|([qkv])_proj)\.(weight|bias)'


def convert_hf_dinov2(state: StateDict) -> StateDict:
    """Hugging Face ``Dinov2Model``: ``embeddings.position_embeddings``, ``encoder.layer.{i}``, attention as the hub
    files name it (``attention.attention.{query,key,value}``, ``attention.output.dense``) or as recent transformers
    name it in memory (``attention.{q,k,v,o}_proj``), ``layer_scale{1,2}.lambda1``, final ``layernorm``."""
    out = {}
    renames = [
        (r'^embeddings\.cls_token$', 'cls_token'),
        (r'^embeddings\.position_embeddings$', 'pos_embed'),
        (r'^embeddings\.patch_embeddings\.projection\.', 'patch_embed.proj.'),
        (r'^encoder\.layer\.(\d+)\.', r'blocks.\1.'),
        (r'\.attention\.(?:output\.dense|o_proj)\.', '.attn.proj.'),
        (r'\.layer_scale([12])\.lambda1$', r'.ls\1.gamma'),
        (r'^layernorm\.', 'norm.'),
    ]
    qkv = {}
    for key, value in state.items():
        key = re.sub(r'^(?:model|dinov2)\.', '', key)
        if key == 'embeddings.mask_token':
            continue
        m = re.fullmatch(HF_DINOV2_QKV, key)
        if m:
            qkv[(int(m.group(1)), m.group(4), (m.group(2) or m.group(3))[0])] = value
            continue
        out[_rename(key, renames)] = value
    for layer, kind in sorted({(layer, kind) for layer, kind, _ in qkv}):
        parts = [qkv.get((layer, kind, p)) for p in 'qkv']
        if any(t is None for t in parts):
            raise KeyError(f'Hugging Face DINOv2 layer {layer}: the attention {kind} lacks one of query/key/value')
        out[f'blocks.{layer}.attn.qkv.{kind}'] = torch.cat(parts)
    return out


def convert_depth_anything_v2(state: StateDict) -> StateDict:
    """DepthAnything/Depth-Anything-V2 ``.pth``: DINOv2 backbone under ``pretrained.`` (head left out)."""
    return convert_vit(strip_prefix(state, 'pretrained.'))


def convert_vit(state: StateDict) -> StateDict:
    """timm ViT / official DINOv2 / JetViT's own names (DINOv2's pretraining ``mask_token`` dropped); the official
    DINOv2-giant's fused SwiGLU ``mlp.w12`` / ``mlp.w3`` are timm's packed ``mlp.fc1`` / ``mlp.fc2`` (same order:
    gate half first)."""
    out = {}
    for key, value in state.items():
        if key == 'mask_token':
            continue
        key = re.sub(r'\.mlp\.w12\.', '.mlp.fc1.', key)
        out[re.sub(r'\.mlp\.w3\.', '.mlp.fc2.', key)] = value
    return out


CONVERTERS: Dict[str, Callable[[StateDict], StateDict]] = {
    'dinov3_official': convert_dinov3_official,
    'timm_eva': convert_timm_eva,
    'hf_dinov3': convert_hf_dinov3,
    'hf_dinov2': convert_hf_dinov2,
    'depth_anything_v2': convert_depth_anything_v2,
    'vit': convert_vit,
}


def detect_format(state: StateDict) -> str:
    """Name the format of ``state`` from its keys (one of ``CONVERTERS``)."""
    keys = set(state)
    if any(k.startswith('pretrained.') for k in keys):
        return 'depth_anything_v2'
    if '_extra_state' in keys or any('.attn.candidates.' in k for k in keys):  # a JetViT's or a supernet's own
        return 'vit'
    if 'storage_tokens' in keys:
        return 'dinov3_official'
    if any(re.match(r'((model|dinov2)\.)?embeddings\.position_embeddings$', k) for k in keys):
        return 'hf_dinov2'
    if any(k.startswith('embeddings.') or re.match(r'(model\.)?layer\.\d+\.attention\.', k) for k in keys):
        return 'hf_dinov3'
    if any(re.search(r'blocks\.\d+\.(gamma_1|attn\.q_bias)', k) for k in keys):
        return 'timm_eva'
    if any(re.search(r'blocks\.\d+\.attn\.qkv\.weight', k) for k in keys):
        return 'vit'
    sample = ', '.join(sorted(keys)[:8])
    raise ValueError(f'unrecognised checkpoint format (keys: {sample}, ...); known formats: {", ".join(CONVERTERS)}')


def to_jetvit_names(state: StateDict) -> Tuple[StateDict, str]:
    """Convert any known format to JetViT names; returns ``(state, format name)``."""
    fmt = detect_format(state)
    return CONVERTERS[fmt](state), fmt


def depth_head_state(state: StateDict) -> StateDict:
    """The ``depth_head.`` part of a DepthAnythingV2 checkpoint, prefix removed."""
    head = strip_prefix(state, 'depth_head.')
    if not head:
        raise ValueError('checkpoint has no depth_head.* keys (not a DepthAnythingV2 checkpoint)')
    return head
