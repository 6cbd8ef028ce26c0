"""Teachers from timm: which timm models a JetViT can start from, built once, and how their parts are read.

Supported are timm's ``VisionTransformer`` (``Block`` layers with ``Attention``: plain ViTs with absolute position
embeddings, register variants such as ``vit_large_patch14_reg4_dinov2``, CLIP ViTs with a pre-norm) and ``Eva``
(``EvaBlock`` layers with ``EvaAttention``: DINOv3, EVA02, RoPE ViTs), by a short name of
:data:`~jetvit_mm.models.variants.VARIANTS` or by the timm model name. A JetViT replaces each layer's attention by
a token mixer that computes with the teacher's q/k/v/o, so a teacher whose attention does more (normalises q and k
or its output, gates it, another block layout) is refused, saying what it has that the mixers lack.
"""
from typing import List, Optional, Tuple

import timm
import torch
from timm.layers import LayerScale
from timm.models.eva import Eva, EvaAttention, EvaBlock
from timm.models.vision_transformer import Attention, Block, VisionTransformer
from torch import nn

from .variants import VARIANTS, ViTVariant

__all__ = ['SUPPORTED', 'create_teacher', 'layer_scale', 'teacher_depth', 'teacher_problems', 'teacher_qkv',
           'teacher_timm_name']

SUPPORTED = ('timm VisionTransformer models (Block layers with Attention: plain ViTs, register variants such as '
             'vit_large_patch14_reg4_dinov2) and Eva models (EvaBlock layers with EvaAttention: DINOv3, EVA02)')
FAMILIES = {VisionTransformer: (Block, Attention), Eva: (EvaBlock, EvaAttention)}


def teacher_timm_name(model_name: str) -> Tuple[str, Optional[ViTVariant]]:
    """``(timm model name, variant)``: an alias of :data:`VARIANTS` and its entry, or a timm model name and None."""
    if model_name in VARIANTS:
        return VARIANTS[model_name].timm_name, VARIANTS[model_name]
    if isinstance(model_name, str) and timm.is_model(model_name):
        return model_name, None
    raise ValueError(f'unknown model_name {model_name!r}; valid names: {", ".join(VARIANTS)}, or the name of a timm '
                     f'model of the supported families: {SUPPORTED}')


def teacher_depth(model_name: str) -> int:
    """The number of layers of ``model_name`` (a short name's entry, else the timm model built on the meta device:
    no memory, no random numbers drawn)."""
    timm_name, variant = teacher_timm_name(model_name)
    if variant is not None:
        return variant.depth
    with torch.device('meta'):
        return len(timm.create_model(timm_name, pretrained=False).blocks)


def create_teacher(model_name: str, drop_path_rate: float = 0., **overrides) -> Tuple[nn.Module, Optional[ViTVariant]]:
    """The randomly initialised timm teacher of ``model_name`` (``overrides``: ``embed_dim``, ``depth``, ... for
    small models), checked to be supported; and its variant (None for a timm name)."""
    timm_name, variant = teacher_timm_name(model_name)
    if variant is not None:  # an official layout timm's defaults do not give at this width (DINOv2-g's SwiGLU)
        overrides = {**variant.timm_kwargs(overrides.get('embed_dim', variant.embed_dim)), **overrides}
    try:
        teacher = timm.create_model(timm_name, pretrained=False, num_classes=0, dynamic_img_size=True,
                                    drop_path_rate=drop_path_rate, **overrides)
    except TypeError as error:  # a model class that takes none of a ViT's arguments
        with torch.device('meta'):
            kind = type(timm.create_model(timm_name, pretrained=False)).__name__
        raise ValueError(f'{model_name!r} cannot be a JetViT teacher: it is a timm {kind}, not one of the supported '
                         f'families, {SUPPORTED} ({error})') from None
    problems = teacher_problems(teacher)
    if problems:
        raise ValueError(f'{model_name!r} cannot be a JetViT teacher: {"; ".join(problems)}. JetViT replaces each '
                         f'layer\'s attention by a token mixer built from its q/k/v/o projections; supported are '
                         f'{SUPPORTED}')
    return teacher, variant


def teacher_problems(teacher: nn.Module) -> List[str]:
    """What ``teacher`` has that a JetViT cannot reproduce (empty: supported)."""
    family = type(teacher) if type(teacher) in FAMILIES else None
    if family is None:  # subclasses add tokens or stages (a distillation token, ...) the JetViT forward lacks
        parent = next((f.__name__ for f in FAMILIES if isinstance(teacher, f)), None)
        extra = f' (a subclass of {parent} with its own forward)' if parent else ''
        return [f'it is a timm {type(teacher).__name__}{extra}, not a VisionTransformer or Eva']
    block_cls, attn_cls = FAMILIES[family]
    problems = []
    patch = tuple(teacher.patch_embed.patch_size)
    if patch[0] != patch[1]:
        problems.append(f'its patches are not square ({patch})')
    if getattr(teacher, 'rope_mixed', False):
        problems.append('its RoPE differs per layer (mixed mode)')
    for i, block in enumerate(teacher.blocks):
        where = f'layer {i}'
        if type(block) is not block_cls:
            problems.append(f'{where} is a {type(block).__name__}, another block type than {block_cls.__name__} '
                            f'(pre-norm attention, then MLP)')
            break
        attn = block.attn
        if type(attn) is not attn_cls:
            problems.append(f'{where}\'s attention is a {type(attn).__name__}, not {attn_cls.__name__}')
            break
        problems += _attention_problems(where, attn, teacher.embed_dim)
        if problems:
            break
    return problems


def _attention_problems(where: str, attn: nn.Module, dim: int) -> List[str]:
    problems = []
    fused = isinstance(getattr(attn, 'qkv', None), nn.Linear)
    separate = all(isinstance(getattr(attn, f'{p}_proj', None), nn.Linear) for p in 'qkv')
    if not (fused or separate):
        problems.append(f'{where}\'s attention has no qkv projection (neither a fused qkv Linear nor q/k/v ones)')
    for name, what in (('q_norm', 'normalises q'), ('k_norm', 'normalises k'),
                       ('norm', 'normalises its output before proj (scale_attn_norm / scale_attn_inner)')):
        if not isinstance(getattr(attn, name, nn.Identity()), nn.Identity):
            problems.append(f'{where}\'s attention {what}, which the mixers do not')
    if getattr(attn, 'gate', None) is not None:
        problems.append(f'{where}\'s attention is gated, which the mixers are not')
    if attn.num_heads * attn.head_dim != dim or not isinstance(getattr(attn, 'proj', None), nn.Linear):
        problems.append(f'{where}\'s attention is {attn.num_heads * attn.head_dim} wide, not the embedding\'s {dim}')
    return problems


def teacher_qkv(attn: nn.Module) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The attention's q/k/v projection as one fused ``(weight [3D, D], bias [3D] or None)`` (timm's Eva keeps q/v
    biases apart with a zero k bias, EVA02 has separate q/k/v Linears without a k bias)."""
    if isinstance(getattr(attn, 'qkv', None), nn.Linear):
        weight, bias = attn.qkv.weight, attn.qkv.bias
        if getattr(attn, 'q_bias', None) is not None:
            bias = torch.cat([attn.q_bias, torch.zeros_like(attn.q_bias), attn.v_bias])
        return weight, bias
    projections = [getattr(attn, f'{p}_proj') for p in 'qkv']
    weight = torch.cat([p.weight for p in projections])
    if all(p.bias is None for p in projections):
        return weight, None
    return weight, torch.cat([p.bias if p.bias is not None else torch.zeros(p.out_features, dtype=p.weight.dtype,
                                                                             device=p.weight.device)
                              for p in projections])


def layer_scale(block: nn.Module, index: int) -> nn.Module:
    """timm ViT blocks own ``ls1``/``ls2``; timm Eva blocks own ``gamma_1``/``gamma_2`` parameters (or None)."""
    if hasattr(block, f'ls{index}'):
        return getattr(block, f'ls{index}')
    gamma = getattr(block, f'gamma_{index}')
    if gamma is None:
        return nn.Identity()
    layer = LayerScale(gamma.shape[0])
    layer.gamma.data.copy_(gamma.data)
    return layer
