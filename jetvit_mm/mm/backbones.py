"""Backbones registered for mmseg / mmdet configs (``type='JetViT'``, ``type='JetViTSupernet'``)."""
from jetvit_mm.models.jetvit import JetViT
from jetvit_mm.models.supernet import JetViTSupernet

from .registry import MODELS

MODELS.register_module(name='JetViT', module=JetViT)
MODELS.register_module(name='JetViTSupernet', module=JetViTSupernet)

__all__ = ['JetViT', 'JetViTSupernet']
