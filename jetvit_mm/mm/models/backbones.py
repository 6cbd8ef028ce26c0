"""Backbones registered for mmseg / mmdet configs (``type='JetViT'``, ``type='JetViTSupernet'``).

They are the pure models plus the frameworks' conventions for pretrained weights, as mmseg's and mmdet's own
backbones take them: ``init_cfg=dict(type='Pretrained', checkpoint=..., prefix=...)`` and the deprecated
``pretrained=PATH`` (also set by ``EncoderDecoder(pretrained=...)``), loaded in ``init_weights()`` (which the runner
calls before training; a checkpoint given to ``tools/test.py`` / ``init_model`` replaces them). The weights go
through the same strict, format-detecting, weights-only loader as ``checkpoint=``
(:meth:`jetvit_mm.models.JetViT.load_checkpoint`).
"""
import warnings
from pathlib import Path
from typing import Any, Optional, Union

from jetvit_mm.models import jetvit as core_jetvit
from jetvit_mm.models import supernet as core_supernet
from jetvit_mm.models import token_reduction as core_token_reduction

from ..registry import MODELS

PRETRAINED_KEYS = ('type', 'checkpoint', 'prefix', 'map_location')


def pretrained_init_cfg(init_cfg: Optional[Union[dict, list]], pretrained: Optional[Union[str, Path]],
                        checkpoint: Optional[Union[str, Path]], name: str) -> Optional[dict]:
    """The one ``init_cfg`` a backbone keeps: ``pretrained=PATH`` becomes ``dict(type='Pretrained', checkpoint=PATH)``
    (as mmseg's ViT does); both at once, or either beside ``checkpoint=``, is refused, as is anything but a
    ``'Pretrained'`` init (a JetViT inherits its weights: random inits would undo that)."""
    given = [k for k, v in dict(init_cfg=init_cfg, pretrained=pretrained, checkpoint=checkpoint).items() if v]
    if len(given) > 1:
        raise ValueError(f'{name}: {" and ".join(given)} both name weights to load; set one of them')
    if pretrained is not None:
        if not isinstance(pretrained, (str, Path)):
            raise TypeError(f'{name}: pretrained must be a path (str) or None, got {type(pretrained).__name__}')
        warnings.warn(f'{name}: pretrained= is deprecated in mmseg/mmdet, use init_cfg=dict(type=\'Pretrained\', '
                      f'checkpoint=...)', DeprecationWarning, stacklevel=3)
        return dict(type='Pretrained', checkpoint=str(pretrained))
    if not init_cfg:
        return None
    cfgs = init_cfg if isinstance(init_cfg, (list, tuple)) else [init_cfg]
    if len(cfgs) != 1 or not isinstance(cfgs[0], dict) or cfgs[0].get('type') != 'Pretrained':
        raise ValueError(f'{name}: init_cfg must be dict(type=\'Pretrained\', checkpoint=..., prefix=...) or None '
                         f'(a JetViT inherits its weights; other inits would overwrite them), got {init_cfg!r}')
    cfg = dict(cfgs[0])
    unknown = sorted(set(cfg) - set(PRETRAINED_KEYS))
    if unknown or not cfg.get('checkpoint'):
        raise ValueError(f'{name}: init_cfg of type Pretrained takes {", ".join(PRETRAINED_KEYS[1:])} (checkpoint '
                         f'required); got {unknown or "no checkpoint"}')
    return cfg


class _FrameworkPretrained:
    """``init_cfg`` / ``pretrained`` for a pure JetViT class (mixed in before it)."""

    def __init__(self, *args: Any, init_cfg: Optional[Union[dict, list]] = None,
                 pretrained: Optional[Union[str, Path]] = None, **kwargs: Any) -> None:
        cfg = pretrained_init_cfg(init_cfg, pretrained, kwargs.get('checkpoint'), type(self).__name__)
        super().__init__(*args, **kwargs)
        self.init_cfg = cfg

    def init_weights(self) -> None:
        """Load ``init_cfg``'s Pretrained weights (strictly; ``prefix`` selects a sub-module's), once."""
        cfg = self.init_cfg
        if cfg is None or getattr(self, 'is_init', False):
            return
        self.load_checkpoint(cfg['checkpoint'], prefix=cfg.get('prefix'))
        if self.frozen:
            self.requires_grad_(False)
        self.is_init = True


@MODELS.register_module(name='JetViT')
class JetViT(_FrameworkPretrained, core_jetvit.JetViT):
    """:class:`jetvit_mm.models.JetViT` with ``init_cfg`` / ``pretrained`` (see the module)."""


@MODELS.register_module(name='JetViTSupernet')
class JetViTSupernet(_FrameworkPretrained, core_supernet.JetViTSupernet):
    """:class:`jetvit_mm.models.JetViTSupernet` with ``init_cfg`` / ``pretrained`` (see the module)."""


@MODELS.register_module(name='TokenClusteringJetViT')
class TokenClusteringJetViT(_FrameworkPretrained, core_token_reduction.TokenClusteringJetViT):
    """:class:`jetvit_mm.models.token_reduction.TokenClusteringJetViT` (the training-free token-clustering baseline:
    ``clustering='f2@1-9'``) with ``init_cfg`` / ``pretrained`` (see the module)."""


__all__ = ['JetViT', 'JetViTSupernet', 'TokenClusteringJetViT', 'pretrained_init_cfg']
