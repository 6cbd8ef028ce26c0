"""OpenMMLab adapter: the only part of jetvit_mm that imports mmengine, mmseg and mmdet.

Importing it registers every jetvit_mm type (see :mod:`jetvit_mm.mm.registry`)::

    custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)

Importing it leaves mmengine's checkpoint loaders as they are; it adds to torch's weights-only allow-list the data
types a checkpoint of mmengine's runner holds (:func:`~jetvit_mm.mm.checkpoint.allow_runner_checkpoint_types`:
``HistoryBuffer``, numpy values; nothing that runs code), so that the frameworks' clients (``init_model``,
``MMSegInferencer``, ``init_detector``, ``DetInferencer``) and the core's reader (``JetViT(checkpoint=...)``) load a
checkpoint of any config that imports the plugin. The runner the configs name (:class:`~jetvit_mm.mm.engine.runner.
JetViTRunner`, ``configs/_base_``) reads its checkpoints with the core's reader.
"""
from .checkpoint import ArchSpecHook, CheckpointDigestHook, allow_runner_checkpoint_types
from .checkpoint.fsdp import FSDP2CheckpointHook
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
from .engine.fsdp import FSDP2Runner, FSDP2Wrapper
from .engine.hooks import SupernetSamplerHook
from .engine.optim import LayerDecayOptimWrapperConstructor
from .engine.runner import JetViTRunner
from .models.backbones import JetViT, JetViTSupernet
from .models.distiller import FeatureDistiller
from .models.mixers import mirror_mixers
from .models.necks import SimpleFeaturePyramid
from .models.seg_heads import LinearProbeHead
from .registry import registered_types
from .search.loop import JetViTSearchLoop

allow_runner_checkpoint_types()  # the frameworks' clients: an mmengine runner checkpoint's data types, nothing more

__all__ = ['AffineInvariantDepthMetric', 'ArchSpecHook', 'CheckpointDigestHook', 'CityscapesDepthDataset',
           'DA2KDataset', 'DA2KMetric', 'DIODEDepthDataset', 'DPTDepthHead', 'DepthAnythingResize',
           'FSDP2CheckpointHook', 'FSDP2Runner', 'FSDP2Wrapper', 'FeatureDistiller', 'JetViT', 'JetViTRunner',
           'JetViTSearchLoop', 'JetViTDepthAnything', 'JetViTSupernet', 'LayerDecayOptimWrapperConstructor',
           'LinearProbeHead', 'LoadZeroShotDepth', 'PseudoLabelDepthEstimator',
           'ScaleShiftInvariantLoss', 'SimpleFeaturePyramid', 'SintelDepthDataset', 'SupernetSamplerHook',
           'allow_runner_checkpoint_types', 'mirror_mixers', 'registered_types']
