"""A generated segmentation task where far-away context decides the class: the demo's dataset (the task and why it
needs global context: docs/toy_reproduction.md).

**partner** (default): each one-patch object's class is its shape and the colour of its partner, a square half the
image width away in the same row (``class = OBJECT_BASE + shape * NUM_CUES + cue``). **corner**: one marker in a
corner block colours every object; window attention recovers it through the registers, kept for that comparison.

Written in the exact Cityscapes layout, so mmseg's ``CityscapesDataset`` reads it unchanged (train ids 0..7 of 19).
Each sample has its own generator seeded by ``(seed, split, index)``: the same seed gives the same bytes, and a
sample does not change when another split grows. Only numpy and PIL are used.
"""
from __future__ import annotations

import zlib
from pathlib import Path
from types import MappingProxyType
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from PIL import Image

PathLike = Union[str, Path]
Size = Tuple[int, int]  # (height, width)

BACKGROUND = 0  # train id of the background ("road")
MARKER = 1  # train id of the marker square ("sidewalk")
OBJECT_BASE = 2  # first object train id
SHAPES = ('solid', 'striped')
TASKS = ('partner', 'corner')
#: The partner / marker colours (RGB): the cue index is the position in this tuple.
CUE_COLORS = ((230, 30, 30), (30, 210, 30), (30, 60, 240))
NUM_CUES = len(CUE_COLORS)
#: Colours of the distractor squares (saturated like the marker, but never a cue; labelled background).
DISTRACTOR_COLORS = ((235, 215, 30), (215, 40, 215), (40, 215, 215), (240, 130, 20), (130, 40, 230))
NUM_TASK_CLASSES = OBJECT_BASE + len(SHAPES) * NUM_CUES  # 8: train ids 0..7 (of Cityscapes' 19)
CORNERS = ('top_left', 'top_right', 'bottom_left', 'bottom_right')
CONTEXT_SEG_SPLITS = MappingProxyType({'train': 512, 'val': 128})

#: Cityscapes label id of each of the 19 train ids (0..18); train id 255 (ignore) maps to 0.
CITYSCAPES_TRAIN_ID_TO_ID = (7, 8, 11, 12, 13, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 31, 32, 33)
CITYSCAPES_DEFAULT_CITIES = MappingProxyType({
    'train': ('aachen', 'bochum'),
    'val': ('frankfurt', 'lindau'),
    'test': ('berlin', 'bielefeld'),
})  # fmt: skip


def sample_rng(seed: int, *keys: Union[str, int]) -> np.random.Generator:
    """A generator for one sample, independent of every other sample."""
    entropy = [int(seed)] + [zlib.crc32(k.encode()) if isinstance(k, str) else int(k) for k in keys]
    return np.random.default_rng(entropy)


def save_png(path: Path, array: np.ndarray) -> None:
    """Write a uint8 (L or RGB) or uint16 (16-bit grey) PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, format='PNG')


def check_splits(splits: Mapping[str, int], valid: Sequence[str], dataset: str) -> None:
    """Raise on a split name the real dataset does not have."""
    unknown = sorted(set(splits) - set(valid))
    if unknown:
        raise ValueError(f'{dataset}: unknown split(s) {unknown}; valid splits are {list(valid)}')


def cityscapes_train_ids_to_ids(train_ids: np.ndarray) -> np.ndarray:
    """Map a Cityscapes train-id map to label ids (official table; ignore -> 0 "unlabeled")."""
    lut = np.zeros(256, np.uint8)
    lut[: len(CITYSCAPES_TRAIN_ID_TO_ID)] = CITYSCAPES_TRAIN_ID_TO_ID
    return lut[train_ids]


def object_class(shape: int, cue: int) -> int:
    """Train id of an object of ``SHAPES[shape]`` whose cue (partner / marker) has colour ``CUE_COLORS[cue]``."""
    if not (0 <= shape < len(SHAPES) and 0 <= cue < NUM_CUES):
        raise ValueError(f'shape must be in 0..{len(SHAPES) - 1} and cue in 0..{NUM_CUES - 1}, got {shape}, {cue}')
    return OBJECT_BASE + shape * NUM_CUES + cue


def _corner_origin(corner: str, size: Size, extent: int, margin: int) -> Tuple[int, int]:
    """(y0, x0) of a square of side ``extent`` placed ``margin`` pixels from ``corner``."""
    h, w = size
    y0 = margin if corner.startswith('top') else h - margin - extent
    x0 = margin if corner.endswith('left') else w - margin - extent
    return y0, x0


def _exclusion_block(corner: str, size: Size, exclusion: int) -> Tuple[int, int, int, int]:
    """(y0, x0, y1, x1), exclusive ends: the corner block objects must not enter."""
    h, w = size
    y0 = 0 if corner.startswith('top') else h - exclusion
    x0 = 0 if corner.endswith('left') else w - exclusion
    return y0, x0, y0 + exclusion, x0 + exclusion


def _background(rng: np.random.Generator, size: Size) -> np.ndarray:
    """Low-saturation textured background: a colour gradient, coarse blotches and pixel noise (float RGB)."""
    h, w = size
    base = rng.uniform(70, 150)
    tint = rng.uniform(-15, 15, size=3)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    gradient = rng.uniform(-25, 25) * (yy / h - .5) + rng.uniform(-25, 25) * (xx / w - .5)
    coarse = rng.normal(0, 12, size=(h // 8 + 1, w // 8 + 1)).repeat(8, 0).repeat(8, 1)[:h, :w]
    grey = base + gradient + coarse
    return grey[..., None] + tint + rng.normal(0, 6, size=(h, w, 3))


def _object_texture(shape: int, oh: int, ow: int, rng: np.random.Generator) -> np.ndarray:
    """Grey level of an ``oh`` x ``ow`` object: flat (``solid``) or 4-pixel horizontal stripes (``striped``)."""
    shade = rng.uniform(150, 235)
    grey = np.full((oh, ow), shade, np.float32)
    if SHAPES[shape] == 'striped':
        grey[(np.arange(oh) // 4) % 2 == 1] = shade - rng.uniform(70, 110)
    return grey


def _paint(rgb: np.ndarray, box: Tuple[int, int, int, int], color, rng: np.random.Generator) -> None:
    """Fill ``box`` (y0, x0, y1, x1) with ``color`` (RGB, or a grey-level array) plus pixel noise."""
    y0, x0, y1, x1 = box
    color = np.asarray(color, np.float32)
    rgb[y0:y1, x0:x1] = (color[..., None] if color.ndim == 2 else color) + rng.normal(0, 6, size=(y1 - y0, x1 - x0, 3))


def partner_sample(seed: int, split: str, index: int, size: Size = (64, 128), patch: int = 16,
                   num_objects: Tuple[int, int] = (2, 4)) -> Tuple[np.ndarray, np.ndarray, Dict]:
    """One sample of the partner task: ``(RGB uint8 [H, W, 3], train ids uint8 [H, W], meta)``; ``meta['objects']``
    lists ``dict(shape, cue, cls, box, partner_box)``, boxes (y0, x0, y1, x1) with exclusive ends."""
    h, w = size
    if h % patch or w % (2 * patch):
        raise ValueError(f'image size {size}: the height must be a multiple of the patch ({patch}) and the width '
                         f'of two patches')
    rows, cols = h // patch, w // patch
    offset = cols // 2
    rng = sample_rng(seed, 'context_seg', split, index)
    rgb = _background(rng, size)
    label = np.full(size, BACKGROUND, np.uint8)
    used, objects = set(), []
    for _ in range(int(rng.integers(num_objects[0], num_objects[1] + 1))):
        for _attempt in range(50):
            r, c = int(rng.integers(rows)), int(rng.integers(cols))
            pc = c + offset if c < offset else c - offset
            if (r, c) not in used and (r, pc) not in used:
                break
        else:
            continue
        used |= {(r, c), (r, pc)}
        shape, cue = int(rng.integers(len(SHAPES))), int(rng.integers(NUM_CUES))
        box = (r * patch, c * patch, (r + 1) * patch, (c + 1) * patch)
        partner_box = (r * patch, pc * patch, (r + 1) * patch, (pc + 1) * patch)
        _paint(rgb, box, _object_texture(shape, patch, patch, rng), rng)
        _paint(rgb, partner_box, CUE_COLORS[cue], rng)
        cls = object_class(shape, cue)
        label[box[0]:box[2], box[1]:box[3]] = cls
        label[partner_box[0]:partner_box[2], partner_box[1]:partner_box[3]] = MARKER
        objects.append(dict(shape=shape, cue=cue, cls=cls, box=box, partner_box=partner_box))
    return np.clip(rgb, 0, 255).astype(np.uint8), label, dict(objects=objects)


def corner_sample(seed: int, split: str, index: int, size: Size = (64, 128), exclusion: int = 32,
                  marker_size: int = 32, num_objects: Tuple[int, int] = (2, 4),
                  object_size: Tuple[int, int] = (16, 47), align: int = 16,
                  distractors: Tuple[int, int] = (0, 0)) -> Tuple[np.ndarray, np.ndarray, Dict]:
    """One sample of the corner task: ``(RGB uint8 [H, W, 3], train ids uint8 [H, W], meta)``, sizes in pixels.

    ``distractors``: how many squares of the marker's size in non-cue colours (labelled background) lie outside the
    marker's block, so saturation alone does not find it. ``align``: boxes snap to this grid (16: whole patches).
    ``meta``: ``corner``, ``cue``, ``marker_box``, ``objects`` (``dict(shape, cls, box)`` in drawing order; a later
    one may cover an earlier one) and ``distractors`` (boxes).
    """
    h, w = size
    if h < 2 * exclusion or w < 2 * exclusion:
        raise ValueError(f'image size {size} must be at least twice the exclusion block ({exclusion}) per side')
    if marker_size > exclusion:
        raise ValueError(f'marker_size {marker_size} does not fit in the exclusion block {exclusion}')
    rng = sample_rng(seed, 'context_seg_corner', split, index)
    corner = CORNERS[int(rng.integers(len(CORNERS)))]
    cue = int(rng.integers(NUM_CUES))
    rgb = _background(rng, size)
    label = np.full(size, BACKGROUND, np.uint8)

    # the marker, in its corner block
    margin = int(rng.integers(0, exclusion - marker_size + 1)) // align * align
    my0, mx0 = _corner_origin(corner, size, marker_size, margin)
    marker_box = (my0, mx0, my0 + marker_size, mx0 + marker_size)
    rgb[my0:my0 + marker_size, mx0:mx0 + marker_size] = np.asarray(CUE_COLORS[cue], np.float32) \
        + rng.normal(0, 6, size=(marker_size, marker_size, 3))
    label[my0:my0 + marker_size, mx0:mx0 + marker_size] = MARKER

    # the objects, outside the marker's block
    by0, bx0, by1, bx1 = _exclusion_block(corner, size, exclusion)
    objects = []
    for _ in range(int(rng.integers(num_objects[0], num_objects[1] + 1))):
        for _attempt in range(50):
            oh, ow = (max(align, int(v) // align * align)
                      for v in rng.integers(object_size[0], object_size[1] + 1, size=2))
            y0 = int(rng.integers(0, h - oh + 1)) // align * align
            x0 = int(rng.integers(0, w - ow + 1)) // align * align
            if y0 >= by1 or y0 + oh <= by0 or x0 >= bx1 or x0 + ow <= bx0:  # no overlap with the block
                break
        else:
            continue
        shape = int(rng.integers(len(SHAPES)))
        grey = _object_texture(shape, oh, ow, rng)
        rgb[y0:y0 + oh, x0:x0 + ow] = grey[..., None] + rng.normal(0, 6, size=(oh, ow, 3))
        cls = object_class(shape, cue)
        label[y0:y0 + oh, x0:x0 + ow] = cls
        objects.append(dict(shape=shape, cls=cls, box=(y0, x0, y0 + oh, x0 + ow)))

    # the distractors, outside the marker's block and off the objects
    boxes = []
    for _ in range(int(rng.integers(distractors[0], distractors[1] + 1))):
        for _attempt in range(50):
            y0 = int(rng.integers(0, h - marker_size + 1)) // align * align
            x0 = int(rng.integers(0, w - marker_size + 1)) // align * align
            y1, x1 = y0 + marker_size, x0 + marker_size
            clear = y0 >= by1 or y1 <= by0 or x0 >= bx1 or x1 <= bx0
            if clear and (label[y0:y1, x0:x1] == BACKGROUND).all():
                break
        else:
            continue
        color = DISTRACTOR_COLORS[int(rng.integers(len(DISTRACTOR_COLORS)))]
        rgb[y0:y1, x0:x1] = np.asarray(color, np.float32) + rng.normal(0, 6, size=(marker_size, marker_size, 3))
        boxes.append((y0, x0, y1, x1))
    meta = dict(corner=corner, cue=cue, marker_box=marker_box, objects=objects, distractors=boxes)
    return np.clip(rgb, 0, 255).astype(np.uint8), label, meta


def context_seg_sample(seed: int, split: str, index: int, task: str = 'partner',
                       **sample_args) -> Tuple[np.ndarray, np.ndarray, Dict]:
    """One sample of ``task`` (:func:`partner_sample` or :func:`corner_sample`, which take ``sample_args``)."""
    if task not in TASKS:
        raise ValueError(f'unknown task {task!r}; valid: {", ".join(TASKS)}')
    return (partner_sample if task == 'partner' else corner_sample)(seed, split, index, **sample_args)


def make_context_seg(root: PathLike, splits: Mapping[str, int] = CONTEXT_SEG_SPLITS, size: Size = (64, 128),
                     seed: int = 0, cities: Optional[Sequence[str]] = None, task: str = 'partner',
                     **sample_args) -> Path:
    """Write ``splits`` (images per split) of the context task in Cityscapes layout under ``root``; returns it."""
    check_splits(splits, tuple(CITYSCAPES_DEFAULT_CITIES), 'context_seg')
    root = Path(root)
    for split, count in splits.items():
        split_cities = tuple(cities) if cities else CITYSCAPES_DEFAULT_CITIES[split]
        for index in range(count):
            image, train_ids, _ = context_seg_sample(seed, split, index, task, size=size, **sample_args)
            city = split_cities[index % len(split_cities)]
            stem = f'{city}_{index:06d}_{19:06d}'
            save_png(root / 'leftImg8bit' / split / city / f'{stem}_leftImg8bit.png', image)
            gt_dir = root / 'gtFine' / split / city
            save_png(gt_dir / f'{stem}_gtFine_labelTrainIds.png', train_ids)
            save_png(gt_dir / f'{stem}_gtFine_labelIds.png', cityscapes_train_ids_to_ids(train_ids))
    return root
