"""Relative depth, pure (torch, numpy, PIL): the zero-shot metrics, the training losses and the benchmarks' file
formats. ``jetvit_mm.mm.depth`` registers them for OpenMMLab."""
from .formats import (
    read_cityscapes_camera,
    read_cityscapes_depth,
    read_da2k_annotations,
    read_diode_depth,
    read_sintel_dpt,
    write_sintel_dpt,
)
from .losses import ScaleShiftInvariantLoss, gradient_matching_loss, ssi_loss
from .metrics import SPACES, affine_invariant_errors, da2k_pair_counts, fit_scale_shift

__all__ = ['SPACES', 'ScaleShiftInvariantLoss', 'affine_invariant_errors', 'da2k_pair_counts', 'fit_scale_shift',
           'gradient_matching_loss', 'read_cityscapes_camera', 'read_cityscapes_depth', 'read_da2k_annotations',
           'read_diode_depth', 'read_sintel_dpt', 'ssi_loss', 'write_sintel_dpt']
