"""Layer-wise learning-rate decay for a JetViT backbone inside any model (ViTDet / BEiT fine-tuning).

Use it from a config::

    optim_wrapper = dict(
        type='OptimWrapper',
        constructor='LayerDecayOptimWrapperConstructor',
        paramwise_cfg=dict(layer_decay_rate=0.7),
        optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.1))
"""
import logging
from typing import Dict, List, Optional, Set, Tuple

from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.optim import OptimWrapper
from mmengine.registry import OPTIM_WRAPPERS, OPTIMIZERS
from torch import nn

from jetvit_mm.models.mixers.squeeze_conv import StaticDepthwiseConv

from ..registry import OPTIM_WRAPPER_CONSTRUCTORS

__all__ = ['LayerDecayOptimWrapperConstructor', 'layer_id', 'no_weight_decay', 'static_kernel_names']

EMBEDDING_PARAMS = ('patch_embed', 'cls_token', 'reg_token', 'pos_embed', 'mask_token')
TOKEN_PARAMS = ('cls_token', 'reg_token', 'pos_embed', 'mask_token')
PARAMWISE_KEYS = ('layer_decay_rate', 'num_layers')


def layer_id(name: str, num_layers: int, backbone_prefix: str = 'backbone.') -> int:
    """Depth of parameter ``name`` for layer decay: 0 the embeddings (:data:`EMBEDDING_PARAMS`), ``i + 1`` anything
    under ``blocks.<i>.`` (supernet candidates too), ``num_layers + 1`` the final norm and everything outside the
    backbone, whose parameter names start with ``backbone_prefix`` ('' if the model is the backbone)."""
    if not name.startswith(backbone_prefix):
        return num_layers + 1
    parts = name[len(backbone_prefix):].split('.')
    if parts[0] in EMBEDDING_PARAMS:
        return 0
    if parts[0] == 'blocks':
        return int(parts[1]) + 1
    return num_layers + 1


def no_weight_decay(name: str, param: nn.Parameter, backbone_prefix: str = 'backbone.') -> bool:
    """Whether ``name`` trains without weight decay: 1-D parameters (norms, biases, LayerScale gammas), tokens and
    the position embedding of the backbone."""
    if param.ndim <= 1 or name.endswith('.bias'):
        return True
    return name.startswith(backbone_prefix) and name[len(backbone_prefix):].split('.')[0] in TOKEN_PARAMS


def static_kernel_names(model: nn.Module) -> Set[str]:
    """Names of the static depthwise kernels of the L mixers' conv on V (``conv='static'``) in ``model``: they train
    without weight decay like the other conv variants' static kernel (a 1-D bias), so the conv ablation compares
    convs, not optimisers."""
    return {f'{name}.weight' if name else 'weight' for name, module in model.named_modules()
            if isinstance(module, StaticDepthwiseConv)}


def _find_backbone(model: nn.Module) -> Tuple[nn.Module, str]:
    """The ViT whose blocks get decayed and the prefix of its parameter names in ``model``."""
    backbone = getattr(model, 'backbone', None)
    if backbone is not None and hasattr(backbone, 'blocks'):
        return backbone, 'backbone.'
    if backbone is None and hasattr(model, 'blocks'):
        return model, ''
    raise TypeError(f'layer decay needs a ViT with `blocks` as `model.backbone` (or as the model itself); '
                    f'{type(model).__name__} has backbone={type(backbone).__name__ if backbone is not None else None}')


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimWrapperConstructor:
    """Optimizer wrapper whose learning rate shrinks geometrically from the heads down to the patch embedding.

    With ``N`` blocks and ``d = layer_decay_rate`` every parameter trains with::

        lr = base_lr * d ** (N + 1 - layer_id)
        weight_decay = 0 if no_weight_decay(name) or name in static_kernel_names(model) else base_wd

    (ViTDet fine-tunes ViT-B with ``d = 0.7``, ViT-L with 0.8). One param group per (layer, decay) pair, named in
    torch's ``param_names``; the first is the heads' (scale 1), so the ``lr`` mmengine logs is ``base_lr`` times the
    schedule. Frozen parameters are left out. ``paramwise_cfg``: ``layer_decay_rate`` (required, in (0, 1]),
    ``num_layers`` (optional, checked against the backbone's depth).
    """

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: Optional[dict] = None) -> None:
        if not isinstance(optim_wrapper_cfg, dict) or 'optimizer' not in optim_wrapper_cfg:
            raise ValueError(f'optim_wrapper_cfg must be a dict with an `optimizer`, got {optim_wrapper_cfg!r}')
        paramwise_cfg = dict(paramwise_cfg or {})
        unknown = sorted(set(paramwise_cfg) - set(PARAMWISE_KEYS))
        if unknown:
            raise ValueError(f'unknown paramwise_cfg keys {unknown}; layer decay takes: {", ".join(PARAMWISE_KEYS)}')
        if 'layer_decay_rate' not in paramwise_cfg:
            raise ValueError('paramwise_cfg.layer_decay_rate is required (ViTDet: 0.7 for ViT-B, 0.8 for ViT-L)')
        self.layer_decay_rate = float(paramwise_cfg['layer_decay_rate'])
        if not 0 < self.layer_decay_rate <= 1:
            raise ValueError(f'layer_decay_rate must be in (0, 1], got {self.layer_decay_rate}')
        self.num_layers = paramwise_cfg.get('num_layers')
        self.optim_wrapper_cfg = dict(optim_wrapper_cfg)
        self.optimizer_cfg = dict(self.optim_wrapper_cfg.pop('optimizer'))
        if self.optimizer_cfg.get('lr') is None:
            raise ValueError('the optimizer config needs an `lr` for layer decay to scale')
        self.base_lr = self.optimizer_cfg['lr']
        self.base_wd = self.optimizer_cfg.get('weight_decay')

    def param_groups(self, model: nn.Module) -> List[dict]:
        """The optimizer's param groups for ``model``: ``params``, ``param_names``, ``lr``, ``weight_decay``."""
        backbone, prefix = _find_backbone(model)
        num_layers = len(backbone.blocks)
        if self.num_layers is not None and self.num_layers != num_layers:
            raise ValueError(f'paramwise_cfg.num_layers={self.num_layers} but the backbone has {num_layers} blocks; '
                             f'leave num_layers out to use the backbone depth')
        groups: Dict[Tuple[int, bool], dict] = {}
        static_kernels = static_kernel_names(model)
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            layer = layer_id(name, num_layers, prefix)
            decay = not (no_weight_decay(name, param, prefix) or name in static_kernels)
            group = groups.get((layer, decay))
            if group is None:
                group = groups[(layer, decay)] = dict(
                    params=[], param_names=[], lr=self.base_lr * self.layer_decay_rate ** (num_layers + 1 - layer))
                if self.base_wd is not None or not decay:
                    group['weight_decay'] = self.base_wd if decay else 0.
            group['params'].append(param)
            group['param_names'].append(name)
        ordered = sorted(groups, key=lambda key: (-key[0], not key[1]))  # heads first, then blocks top-down
        lrs = {layer: groups[(layer, decay)]['lr'] for layer, decay in ordered}
        print_log(f'layer decay {self.layer_decay_rate} over {num_layers} blocks, lr per layer id: '
                  + ', '.join(f'{layer}: {lr:.3g}' for layer, lr in lrs.items()), logger='current', level=logging.INFO)
        return [groups[key] for key in ordered]

    def __call__(self, model: nn.Module) -> OptimWrapper:
        if is_model_wrapper(model):
            model = model.module
        optimizer = OPTIMIZERS.build(dict(self.optimizer_cfg, params=self.param_groups(model)))
        wrapper_cfg = dict(self.optim_wrapper_cfg)
        wrapper_cfg.setdefault('type', 'OptimWrapper')
        return OPTIM_WRAPPERS.build(wrapper_cfg, default_args=dict(optimizer=optimizer))
