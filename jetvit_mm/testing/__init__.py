"""What the tests and the demo run on: tiny synthetic datasets in the real on-disk layouts and the demo's context
task (numpy + PIL only, cheap to import)."""

from .context_seg import TASKS as CONTEXT_SEG_TASKS
from .context_seg import context_seg_sample, make_context_seg
from .datasets import (
    ADE20K_NUM_CLASSES,
    CITYSCAPES_CAMERA,
    CITYSCAPES_TRAIN_ID_TO_ID,
    COCO_CATEGORIES,
    DA2K_SCENES,
    DIODE_SCENE_TYPES,
    NYU_DEPTH_SCALE,
    NYU_SCENES,
    SINTEL_SCENES,
    cityscapes_train_ids_to_ids,
    depth_scene,
    depth_to_png16,
    make_ade20k,
    make_cityscapes,
    make_cityscapes_depth,
    make_coco,
    make_da2k,
    make_depth,
    make_diode,
    make_sintel_depth,
)

__all__ = [
    'ADE20K_NUM_CLASSES',
    'CONTEXT_SEG_TASKS',
    'CITYSCAPES_CAMERA',
    'CITYSCAPES_TRAIN_ID_TO_ID',
    'COCO_CATEGORIES',
    'DA2K_SCENES',
    'DIODE_SCENE_TYPES',
    'NYU_DEPTH_SCALE',
    'NYU_SCENES',
    'SINTEL_SCENES',
    'cityscapes_train_ids_to_ids',
    'context_seg_sample',
    'depth_scene',
    'depth_to_png16',
    'make_ade20k',
    'make_cityscapes',
    'make_cityscapes_depth',
    'make_context_seg',
    'make_coco',
    'make_da2k',
    'make_depth',
    'make_diode',
    'make_sintel_depth',
]
