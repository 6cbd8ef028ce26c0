"""Tiny synthetic datasets in the real on-disk layouts (numpy + PIL only)."""

from .context_seg import TASKS as CONTEXT_SEG_TASKS
from .context_seg import context_seg_sample, make_context_seg
from .generate import (
    ADE20K_NUM_CLASSES,
    CITYSCAPES_TRAIN_ID_TO_ID,
    COCO_CATEGORIES,
    DA2K_SCENES,
    NYU_DEPTH_SCALE,
    NYU_SCENES,
    cityscapes_train_ids_to_ids,
    depth_scene,
    depth_to_png16,
    make_ade20k,
    make_cityscapes,
    make_coco,
    make_da2k,
    make_depth,
)

__all__ = [
    'ADE20K_NUM_CLASSES',
    'CONTEXT_SEG_TASKS',
    'CITYSCAPES_TRAIN_ID_TO_ID',
    'COCO_CATEGORIES',
    'DA2K_SCENES',
    'NYU_DEPTH_SCALE',
    'NYU_SCENES',
    'cityscapes_train_ids_to_ids',
    'context_seg_sample',
    'depth_scene',
    'depth_to_png16',
    'make_ade20k',
    'make_cityscapes',
    'make_context_seg',
    'make_coco',
    'make_da2k',
    'make_depth',
]
