"""OpenMMLab adapter: the only part of jetvit_mm that imports mmengine, mmseg and mmdet.

Importing it registers every jetvit_mm type (see :mod:`jetvit_mm.mm.registry`)::

    custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)

Importing it changes nothing for a model or checkpoint that is not this project's: mmengine's checkpoint loaders stay
as they are. The runner the configs name (:class:`~jetvit_mm.mm.runner.JetViTRunner`, ``configs/_base_``) loads its
checkpoints safely (:mod:`jetvit_mm.mm.checkpoint`), and this project's readers (``JetViT(checkpoint=...)``) learn
runner checkpoints here.
"""
from .backbones import JetViT, JetViTSupernet
from .checkpoint import (
    check_checkpoint_fits,
    enable_runner_checkpoint_loading,
    load_local_checkpoint,
    register_runner_readers,
)
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
from .fsdp import FSDP2Runner, FSDP2Wrapper
from .fsdp_checkpoint import FSDP2CheckpointHook
from .hooks import ArchSpecHook, CheckpointDigestHook, PlainCheckpointHook, SupernetSamplerHook
from .mixers import mirror_mixers
from .necks import SimpleFeaturePyramid
from .optim import LayerDecayOptimWrapperConstructor
from .registry import registered_types
from .runner import JetViTRunner
from .search_loop import JetViTSearchLoop
from .seg_heads import LinearProbeHead

register_runner_readers()  # jetvit_mm's own readers only

__all__ = ['AffineInvariantDepthMetric', 'ArchSpecHook', 'CheckpointDigestHook', 'CityscapesDepthDataset',
           'DA2KDataset', 'DA2KMetric', 'DIODEDepthDataset', 'DPTDepthHead', 'DepthAnythingResize',
           'FSDP2CheckpointHook', 'FSDP2Runner', 'FSDP2Wrapper', 'FeatureDistiller', 'JetViT', 'JetViTRunner',
           'JetViTSearchLoop', 'JetViTDepthAnything', 'JetViTSupernet', 'LayerDecayOptimWrapperConstructor',
           'LinearProbeHead', 'LoadZeroShotDepth', 'PlainCheckpointHook', 'PseudoLabelDepthEstimator',
           'ScaleShiftInvariantLoss', 'SimpleFeaturePyramid', 'SintelDepthDataset', 'SupernetSamplerHook',
           'check_checkpoint_fits', 'enable_runner_checkpoint_loading', 'load_local_checkpoint', 'mirror_mixers',
           'registered_types']
