"""Relative depth in OpenMMLab, one file per kind of registered thing (as mmseg lays them out): the estimator
(``DPTDepthHead``, ``PseudoLabelDepthEstimator``, ``JetViTDepthAnything``), losses (``ScaleShiftInvariantLoss``),
metrics (``AffineInvariantDepthMetric``, ``DA2KMetric``), datasets (``DA2KDataset``, ``DIODEDepthDataset``,
``SintelDepthDataset``, ``CityscapesDepthDataset``) and transforms (``DepthAnythingResize``, ``LoadZeroShotDepth``).
The math and the file formats are pure: :mod:`jetvit_mm.depth`."""
from .datasets import CityscapesDepthDataset, DA2KDataset, DIODEDepthDataset, SintelDepthDataset
from .estimator import DPTDepthHead, JetViTDepthAnything, PseudoLabelDepthEstimator
from .losses import ScaleShiftInvariantLoss
from .metrics import AffineInvariantDepthMetric, DA2KMetric
from .transforms import DepthAnythingResize, LoadZeroShotDepth

__all__ = ['AffineInvariantDepthMetric', 'CityscapesDepthDataset', 'DA2KDataset', 'DA2KMetric', 'DIODEDepthDataset',
           'DPTDepthHead', 'DepthAnythingResize', 'JetViTDepthAnything', 'LoadZeroShotDepth',
           'PseudoLabelDepthEstimator', 'ScaleShiftInvariantLoss', 'SintelDepthDataset']
