"""Depth losses registered for mmseg: ``ScaleShiftInvariantLoss`` (the pure module of
:mod:`jetvit_mm.depth.losses`)."""
from jetvit_mm.depth.losses import ScaleShiftInvariantLoss

from ..registry import MODELS

__all__ = ['ScaleShiftInvariantLoss']

MODELS.register_module(name='ScaleShiftInvariantLoss', module=ScaleShiftInvariantLoss)
