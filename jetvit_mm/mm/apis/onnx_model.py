"""The module an mmseg / mmdet config's model exports to ONNX: its JetViT backbone, with or without its head."""
from typing import Optional, Tuple

from mmengine.registry import DefaultScope
from torch import nn

from jetvit_mm.deploy import ExportModule
from jetvit_mm.models.jetvit import JetViT

from ..engine.launch import read_config
from ..registry import MODELS

PARTS = ('model', 'backbone')


def export_parts(model: nn.Module, part: str = 'model') -> Tuple[nn.Module, Optional[nn.Module]]:
    """``(backbone, head)`` of a built downstream model: a segmentor's or depth estimator's ``decode_head``, a
    detector's ``neck`` (``part='model'``), or no head (``part='backbone'``)."""
    if part not in PARTS:
        raise ValueError(f'unknown part {part!r}; valid: {", ".join(PARTS)}')
    backbone = getattr(model, 'backbone', model)
    if not isinstance(backbone, JetViT):
        raise TypeError(f'the model\'s backbone is a {type(backbone).__name__}, not a JetViT: nothing to export')
    if part == 'backbone':
        return backbone, None
    for name in ('decode_head', 'neck'):
        head = getattr(model, name, None)
        if isinstance(head, nn.Module):
            return backbone, head
    return backbone, None


def build_export_module(config: str, checkpoint: Optional[str], part: str = 'model') -> Tuple[ExportModule, int]:
    """The config's model with the checkpoint's weights (strict: every key must fit), as an :class:`ExportModule`,
    and the backbone's patch size."""
    cfg = read_config(config)
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope', 'mmseg')):
        model = MODELS.build(cfg.model)
    if checkpoint is not None:
        from jetvit_mm.models.checkpoint import apply_checkpoint, read

        apply_checkpoint(model, read(checkpoint), allow_unexpected=True, target=f'the model of {config}')
    backbone, head = export_parts(model, part)
    return ExportModule(backbone, head).eval(), backbone.patch_size
