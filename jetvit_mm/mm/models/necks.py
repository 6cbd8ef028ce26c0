"""Necks registered for mmdet / mmseg configs."""
from jetvit_mm.models.necks import SimpleFeaturePyramid

from ..registry import MODELS

MODELS.register_module(name='SimpleFeaturePyramid', module=SimpleFeaturePyramid)

__all__ = ['SimpleFeaturePyramid']
