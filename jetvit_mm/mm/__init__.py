"""OpenMMLab adapter: the only part of jetvit_mm that imports mmengine, mmseg and mmdet.

Importing it registers every jetvit_mm type (see :mod:`jetvit_mm.mm.registry`)::

    custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)

Importing it leaves mmengine's checkpoint loaders as they are; it adds to torch's weights-only allow-list the data
types a checkpoint of mmengine's runner holds (:func:`~jetvit_mm.mm.checkpoint.allow_runner_checkpoint_types`:
``HistoryBuffer``, numpy values; nothing that runs code), so that the frameworks' clients (``init_model``,
``MMSegInferencer``, ``init_detector``, ``DetInferencer``) load a checkpoint of any config that imports the plugin.
The runner the configs name (:class:`~jetvit_mm.mm.runner.JetViTRunner`, ``configs/_base_``) loads its
checkpoints safely (:mod:`jetvit_mm.mm.checkpoint`), and this project's readers (``JetViT(checkpoint=...)``) learn
runner checkpoints here.
"""
from .backbones import JetViT, JetViTSupernet
from .checkpoint import (
    allow_runner_checkpoint_types,
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

register_runner_readers()  # jetvit_mm's own readers
allow_runner_checkpoint_types()  # the frameworks' clients: an mmengine runner checkpoint's data types, nothing more

__all__ = ['AffineInvariantDepthMetric', 'ArchSpecHook', 'CheckpointDigestHook', 'CityscapesDepthDataset',
           'DA2KDataset', 'DA2KMetric', 'DIODEDepthDataset', 'DPTDepthHead', 'DepthAnythingResize',
           'FSDP2CheckpointHook', 'FSDP2Runner', 'FSDP2Wrapper', 'FeatureDistiller', 'JetViT', 'JetViTRunner',
           'JetViTSearchLoop', 'JetViTDepthAnything', 'JetViTSupernet', 'LayerDecayOptimWrapperConstructor',
           'LinearProbeHead', 'LoadZeroShotDepth', 'PlainCheckpointHook', 'PseudoLabelDepthEstimator',
           'ScaleShiftInvariantLoss', 'SimpleFeaturePyramid', 'SintelDepthDataset', 'SupernetSamplerHook',
           'allow_runner_checkpoint_types', 'check_checkpoint_fits', 'enable_runner_checkpoint_loading',
           'load_local_checkpoint', 'mirror_mixers', 'registered_types']
