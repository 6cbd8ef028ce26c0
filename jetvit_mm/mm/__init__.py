"""OpenMMLab adapter: the only part of jetvit_mm that imports mmengine, mmseg and mmdet.

Importing it registers every jetvit_mm type (see :mod:`jetvit_mm.mm.registry`)::

    custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)
"""
from .checkpoint import enable_runner_checkpoint_loading, load_local_checkpoint
from .registry import registered_types
from .seg_heads import LinearProbeHead

__all__ = ['LinearProbeHead', 'enable_runner_checkpoint_loading', 'load_local_checkpoint', 'registered_types']
