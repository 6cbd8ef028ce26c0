"""Relative depth, pure (torch, numpy, PIL): the zero-shot metrics (:mod:`.metrics`), the training losses
(:mod:`.losses`) and the benchmarks' file formats (:mod:`.formats`, numpy + PIL only). ``jetvit_mm.mm.depth``
registers them for OpenMMLab.

The names below are resolved on first use, so that reading a file format (the tests' dataset generators do) never
imports torch.
"""
import importlib
from typing import Any

_WHERE = {
    'SPACES': 'metrics', 'affine_invariant_errors': 'metrics', 'da2k_pair_counts': 'metrics',
    'fit_scale_shift': 'metrics',
    'ScaleShiftInvariantLoss': 'losses', 'gradient_matching_loss': 'losses', 'ssi_loss': 'losses',
    'read_cityscapes_camera': 'formats', 'read_cityscapes_depth': 'formats', 'read_da2k_annotations': 'formats',
    'read_diode_depth': 'formats', 'read_sintel_dpt': 'formats',
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    return getattr(importlib.import_module(f'.{_WHERE[name]}', __name__), name)
