"""OpenMMLab adapter: the only part of jetvit_mm that imports mmengine, mmseg and mmdet.

Importing it registers every jetvit_mm type (see :mod:`jetvit_mm.mm.registry`)::

    custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)

It also makes mmengine load local checkpoints through :func:`load_local_checkpoint` (still weights-only; the
config text a checkpoint carries is never executed).
"""
from .backbones import JetViT, JetViTSupernet
from .checkpoint import check_checkpoint_fits, enable_runner_checkpoint_loading, load_local_checkpoint
from .depth import (
    AffineInvariantDepthMetric,
    CityscapesDepthDataset,
    DA2KDataset,
    DA2KMetric,
    DepthAnythingResize,
    DIODEDepthDataset,
    DPTDepthHead,
    JetViTDepthAnything,
    LoadZeroShotDepth,
    PseudoLabelDepthEstimator,
    ScaleShiftInvariantLoss,
    SintelDepthDataset,
)
from .distiller import FeatureDistiller
from .fsdp import FSDP2Wrapper
from .fsdp_checkpoint import FSDP2CheckpointHook
from .hooks import ArchSpecHook, SupernetSamplerHook
from .mixers import mirror_mixers
from .necks import SimpleFeaturePyramid
from .optim import LayerDecayOptimWrapperConstructor
from .registry import registered_types
from .search_loop import JetViTSearchLoop
from .seg_heads import LinearProbeHead

enable_runner_checkpoint_loading()

__all__ = ['AffineInvariantDepthMetric', 'ArchSpecHook', 'CityscapesDepthDataset', 'DA2KDataset', 'DA2KMetric',
           'DIODEDepthDataset', 'DPTDepthHead', 'DepthAnythingResize', 'FSDP2CheckpointHook', 'FSDP2Wrapper',
           'FeatureDistiller', 'JetViT', 'JetViTSearchLoop',
           'JetViTDepthAnything', 'JetViTSupernet', 'LayerDecayOptimWrapperConstructor', 'LinearProbeHead',
           'LoadZeroShotDepth', 'PseudoLabelDepthEstimator', 'ScaleShiftInvariantLoss', 'SimpleFeaturePyramid',
           'SintelDepthDataset', 'SupernetSamplerHook', 'check_checkpoint_fits', 'enable_runner_checkpoint_loading',
           'load_local_checkpoint', 'mirror_mixers', 'registered_types']
