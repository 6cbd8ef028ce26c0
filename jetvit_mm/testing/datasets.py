"""Tiny synthetic datasets written in the exact on-disk layouts of the real ones.

Each ``make_*`` function writes a few small images with simple drawn structure (bands, rectangles,
ellipses, polygons) and labels that match the drawing, so that the frameworks' own dataset classes
(mmseg ``CityscapesDataset``, ``ADE20KDataset``, ``NYUDataset``; mmdet ``CocoDataset``) read them
unchanged. Every sample is drawn from its own generator seeded by ``(seed, split, index)``, so a
sample does not change when the number of samples in another split changes.

Only numpy and PIL are used, so this module is cheap to import (no mmengine / mmseg / mmdet).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from types import MappingProxyType
from typing import Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from PIL import Image, ImageDraw

from jetvit_mm.depth.formats import depth_to_cityscapes_disparity, write_sintel_dpt

PathLike = Union[str, Path]
Size = Tuple[int, int]  # (height, width)
Box = Tuple[int, int, int, int]  # (x0, y0, x1, y1), inclusive

# ----------------------------------------------------------------------------------------------
# Constants: facts about the real datasets.
# ----------------------------------------------------------------------------------------------

#: Cityscapes label id of each of the 19 train ids (0..18); train id 255 (ignore) maps to 0.
CITYSCAPES_TRAIN_ID_TO_ID = (7, 8, 11, 12, 13, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 31, 32, 33)
CITYSCAPES_IGNORE_INDEX = 255
CITYSCAPES_PALETTE = (
    (128, 64, 128), (244, 35, 232), (70, 70, 70), (102, 102, 156), (190, 153, 153), (153, 153, 153),
    (250, 170, 30), (220, 220, 0), (107, 142, 35), (152, 251, 152), (70, 130, 180), (220, 20, 60),
    (255, 0, 0), (0, 0, 142), (0, 0, 70), (0, 60, 100), (0, 80, 100), (0, 0, 230), (119, 11, 32),
)  # fmt: skip
CITYSCAPES_DEFAULT_CITIES = MappingProxyType({
    'train': ('aachen', 'bochum'),
    'val': ('frankfurt', 'lindau'),
    'test': ('berlin', 'bielefeld'),
})  # fmt: skip
_CITYSCAPES_SKY, _CITYSCAPES_ROAD, _CITYSCAPES_SIDEWALK, _CITYSCAPES_BUILDING = 10, 0, 1, 2
_CITYSCAPES_OBJECTS = (3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18)

ADE20K_NUM_CLASSES = 150  # labels 1..150; 0 is "other" (ignored with reduce_zero_label=True)
ADE20K_SPLIT_PREFIX = MappingProxyType({'training': 'ADE_train', 'validation': 'ADE_val'})

#: The 80 COCO categories as (id, name, supercategory), ids 1..90 with gaps, as in instances_val2017.json.
COCO_CATEGORIES = (
    (1, 'person', 'person'), (2, 'bicycle', 'vehicle'), (3, 'car', 'vehicle'), (4, 'motorcycle', 'vehicle'),
    (5, 'airplane', 'vehicle'), (6, 'bus', 'vehicle'), (7, 'train', 'vehicle'), (8, 'truck', 'vehicle'),
    (9, 'boat', 'vehicle'), (10, 'traffic light', 'outdoor'), (11, 'fire hydrant', 'outdoor'),
    (13, 'stop sign', 'outdoor'), (14, 'parking meter', 'outdoor'), (15, 'bench', 'outdoor'),
    (16, 'bird', 'animal'), (17, 'cat', 'animal'), (18, 'dog', 'animal'), (19, 'horse', 'animal'),
    (20, 'sheep', 'animal'), (21, 'cow', 'animal'), (22, 'elephant', 'animal'), (23, 'bear', 'animal'),
    (24, 'zebra', 'animal'), (25, 'giraffe', 'animal'), (27, 'backpack', 'accessory'),
    (28, 'umbrella', 'accessory'), (31, 'handbag', 'accessory'), (32, 'tie', 'accessory'),
    (33, 'suitcase', 'accessory'), (34, 'frisbee', 'sports'), (35, 'skis', 'sports'),
    (36, 'snowboard', 'sports'), (37, 'sports ball', 'sports'), (38, 'kite', 'sports'),
    (39, 'baseball bat', 'sports'), (40, 'baseball glove', 'sports'), (41, 'skateboard', 'sports'),
    (42, 'surfboard', 'sports'), (43, 'tennis racket', 'sports'), (44, 'bottle', 'kitchen'),
    (46, 'wine glass', 'kitchen'), (47, 'cup', 'kitchen'), (48, 'fork', 'kitchen'), (49, 'knife', 'kitchen'),
    (50, 'spoon', 'kitchen'), (51, 'bowl', 'kitchen'), (52, 'banana', 'food'), (53, 'apple', 'food'),
    (54, 'sandwich', 'food'), (55, 'orange', 'food'), (56, 'broccoli', 'food'), (57, 'carrot', 'food'),
    (58, 'hot dog', 'food'), (59, 'pizza', 'food'), (60, 'donut', 'food'), (61, 'cake', 'food'),
    (62, 'chair', 'furniture'), (63, 'couch', 'furniture'), (64, 'potted plant', 'furniture'),
    (65, 'bed', 'furniture'), (67, 'dining table', 'furniture'), (70, 'toilet', 'furniture'),
    (72, 'tv', 'electronic'), (73, 'laptop', 'electronic'), (74, 'mouse', 'electronic'),
    (75, 'remote', 'electronic'), (76, 'keyboard', 'electronic'), (77, 'cell phone', 'electronic'),
    (78, 'microwave', 'appliance'), (79, 'oven', 'appliance'), (80, 'toaster', 'appliance'),
    (81, 'sink', 'appliance'), (82, 'refrigerator', 'appliance'), (84, 'book', 'indoor'),
    (85, 'clock', 'indoor'), (86, 'vase', 'indoor'), (87, 'scissors', 'indoor'), (88, 'teddy bear', 'indoor'),
    (89, 'hair drier', 'indoor'), (90, 'toothbrush', 'indoor'),
)  # fmt: skip

#: A few of the scene names mmseg's NYUDataset derives ``category_id`` from (name before the first digit).
NYU_SCENES = ('bathroom', 'bedroom', 'kitchen', 'living_room', 'office')
NYU_DEPTH_SCALE = 1000  # depth PNGs hold millimetres

#: The eight DA-2K scene types (sub-folders of ``images/``).
DA2K_SCENES = (
    'indoor', 'outdoor', 'non_real', 'transparent_reflective', 'adverse_style', 'aerial', 'underwater', 'object',
)  # fmt: skip

#: DIODE's two scene types (folders under each split).
DIODE_SCENE_TYPES = ('indoors', 'outdoor')
#: A few of the 23 scenes of MPI Sintel's training set (its depth ground truth covers the training set only).
SINTEL_SCENES = ('alley_1', 'bamboo_2', 'market_6')
SINTEL_PASSES = ('clean', 'final')
#: The values of a real Cityscapes ``*_camera.json``.
CITYSCAPES_CAMERA = MappingProxyType({
    'extrinsic': {'baseline': 0.209313, 'pitch': 0.038, 'roll': 0.0, 'x': 1.7, 'y': 0.1, 'yaw': -0.0195, 'z': 1.22},
    'intrinsic': {'fx': 2262.52, 'fy': 2265.3017905988554, 'u0': 1096.98, 'v0': 513.137},
})  # fmt: skip

CITYSCAPES_SPLITS = MappingProxyType({'train': 4, 'val': 2})
ADE20K_SPLITS = MappingProxyType({'training': 4, 'validation': 2})
COCO_SPLITS = MappingProxyType({'train2017': 4, 'val2017': 2})
NYU_SPLITS = MappingProxyType({'train': 4, 'test': 2})

# ----------------------------------------------------------------------------------------------
# Small helpers.
# ----------------------------------------------------------------------------------------------


def _sample_rng(seed: int, *keys: Union[str, int]) -> np.random.Generator:
    """A generator for one sample, independent of every other sample."""
    entropy = [int(seed)] + [zlib.crc32(k.encode()) if isinstance(k, str) else int(k) for k in keys]
    return np.random.default_rng(entropy)


def _fixed_palette(num_colors: int, key: str) -> np.ndarray:
    """A fixed (seed-independent) random palette of ``num_colors`` RGB colours, uint8."""
    return _sample_rng(0, 'palette', key).integers(40, 256, size=(num_colors, 3), dtype=np.uint8)


def _random_box(rng: np.random.Generator, size: Size, min_frac: float, max_frac: float, min_px: int = 4) -> Box:
    """A box inside the image whose sides are ``min_frac..max_frac`` of the image sides."""
    h, w = size
    bh = max(min_px, int(h * rng.uniform(min_frac, max_frac)))
    bw = max(min_px, int(w * rng.uniform(min_frac, max_frac)))
    y0 = int(rng.integers(0, max(1, h - bh + 1)))
    x0 = int(rng.integers(0, max(1, w - bw + 1)))
    return x0, y0, min(w, x0 + bw) - 1, min(h, y0 + bh) - 1


def _draw_shape(draw: ImageDraw.ImageDraw, rng: np.random.Generator, box: Box, fill: int) -> None:
    """Fill ``box`` with a rectangle or an ellipse, at random."""
    if rng.random() < 0.5:
        draw.rectangle(box, fill=fill)
    else:
        draw.ellipse(box, fill=fill)


def _shape_mask(rng: np.random.Generator, size: Size, box: Box) -> np.ndarray:
    """A boolean mask of a rectangle or ellipse filling ``box``."""
    canvas = Image.new('L', (size[1], size[0]), 0)
    _draw_shape(ImageDraw.Draw(canvas), rng, box, 1)
    return np.asarray(canvas).astype(bool)


def _colorize(label: np.ndarray, palette: np.ndarray, rng: np.random.Generator, noise: int = 12) -> np.ndarray:
    """An RGB image that paints each label with its palette colour plus a little pixel noise."""
    rgb = palette[label].astype(np.int16)
    rgb += rng.integers(-noise, noise + 1, size=rgb.shape, dtype=np.int16)
    return np.clip(rgb, 0, 255).astype(np.uint8)


def _save_png(path: Path, array: np.ndarray) -> None:
    """Write a uint8 (L or RGB) or uint16 (16-bit grey) PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, format='PNG')


def _save_jpg(path: Path, rgb: np.ndarray) -> None:
    """Write an RGB JPEG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rgb).save(path, format='JPEG', quality=95)


def _write_json(path: Path, obj: object) -> None:
    """Write JSON with sorted keys so equal content gives equal bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, sort_keys=True, indent=1))


def _check_splits(splits: Mapping[str, int], valid: Sequence[str], dataset: str) -> None:
    """Raise on a split name the real dataset does not have."""
    unknown = sorted(set(splits) - set(valid))
    if unknown:
        raise ValueError(f'{dataset}: unknown split(s) {unknown}; valid splits are {list(valid)}')


# ----------------------------------------------------------------------------------------------
# Cityscapes.
# ----------------------------------------------------------------------------------------------


def _cityscapes_label(rng: np.random.Generator, size: Size) -> np.ndarray:
    """Train-id map: sky / buildings / road with sidewalks, objects on top, one ignore blob."""
    h, w = size
    label = np.full((h, w), _CITYSCAPES_BUILDING, np.uint8)
    label[: int(h * rng.uniform(0.15, 0.35))] = _CITYSCAPES_SKY
    road_top = int(h * rng.uniform(0.55, 0.7))
    label[road_top:] = _CITYSCAPES_ROAD
    label[road_top:, : w // 8] = _CITYSCAPES_SIDEWALK
    label[road_top:, w - w // 8 :] = _CITYSCAPES_SIDEWALK
    canvas = Image.fromarray(label)
    draw = ImageDraw.Draw(canvas)
    for _ in range(int(rng.integers(3, 7))):
        cls = int(rng.choice(_CITYSCAPES_OBJECTS))
        _draw_shape(draw, rng, _random_box(rng, size, 0.08, 0.35), cls)
    draw.rectangle(_random_box(rng, size, 0.03, 0.1, min_px=2), fill=CITYSCAPES_IGNORE_INDEX)
    return np.asarray(canvas).copy()


def cityscapes_train_ids_to_ids(train_ids: np.ndarray) -> np.ndarray:
    """Map a Cityscapes train-id map to label ids (official table; ignore -> 0 "unlabeled")."""
    lut = np.zeros(256, np.uint8)
    lut[: len(CITYSCAPES_TRAIN_ID_TO_ID)] = CITYSCAPES_TRAIN_ID_TO_ID
    return lut[train_ids]


def make_cityscapes(
    root: PathLike,
    splits: Mapping[str, int] = CITYSCAPES_SPLITS,
    size: Size = (64, 128),
    cities: Optional[Sequence[str]] = None,
    seed: int = 0,
) -> Path:
    """Write a tiny Cityscapes (leftImg8bit + gtFine labelTrainIds / labelIds); return ``root``.

    Images go round-robin to ``cities`` (default: real city names of each split).
    """
    _check_splits(splits, tuple(CITYSCAPES_DEFAULT_CITIES), 'cityscapes')
    root = Path(root)
    palette = np.zeros((256, 3), np.uint8)
    palette[: len(CITYSCAPES_PALETTE)] = CITYSCAPES_PALETTE
    for split, count in splits.items():
        split_cities = tuple(cities) if cities else CITYSCAPES_DEFAULT_CITIES[split]
        for index in range(count):
            rng = _sample_rng(seed, 'cityscapes', split, index)
            city = split_cities[index % len(split_cities)]
            stem = f'{city}_{index:06d}_{19:06d}'
            train_ids = _cityscapes_label(rng, size)
            image = _colorize(train_ids, palette, rng)
            _save_png(root / 'leftImg8bit' / split / city / f'{stem}_leftImg8bit.png', image)
            gt_dir = root / 'gtFine' / split / city
            _save_png(gt_dir / f'{stem}_gtFine_labelTrainIds.png', train_ids)
            _save_png(gt_dir / f'{stem}_gtFine_labelIds.png', cityscapes_train_ids_to_ids(train_ids))
    return root


# ----------------------------------------------------------------------------------------------
# ADE20K (ADEChallengeData2016).
# ----------------------------------------------------------------------------------------------


def _ade20k_label(rng: np.random.Generator, size: Size) -> np.ndarray:
    """Label map with two background bands, shapes of classes 1..150 and some 0 ("other") pixels."""
    h, w = size
    top, bottom = rng.integers(1, ADE20K_NUM_CLASSES + 1, size=2)
    label = np.full((h, w), top, np.uint8)
    label[int(h * rng.uniform(0.4, 0.7)) :] = bottom
    canvas = Image.fromarray(label)
    draw = ImageDraw.Draw(canvas)
    for _ in range(int(rng.integers(2, 6))):
        _draw_shape(draw, rng, _random_box(rng, size, 0.1, 0.4), int(rng.integers(1, ADE20K_NUM_CLASSES + 1)))
    for _ in range(int(rng.integers(1, 3))):
        draw.rectangle(_random_box(rng, size, 0.03, 0.1, min_px=2), fill=0)
    return np.asarray(canvas).copy()


def make_ade20k(
    root: PathLike,
    splits: Mapping[str, int] = ADE20K_SPLITS,
    size: Size = (64, 64),
    seed: int = 0,
) -> Path:
    """Write a tiny ADEChallengeData2016 (JPEG images, uint8 PNG labels 0..150); return ``root``."""
    _check_splits(splits, tuple(ADE20K_SPLIT_PREFIX), 'ade20k')
    root = Path(root)
    palette = np.zeros((256, 3), np.uint8)
    palette[: ADE20K_NUM_CLASSES + 1] = _fixed_palette(ADE20K_NUM_CLASSES + 1, 'ade20k')
    palette[0] = (0, 0, 0)
    for split, count in splits.items():
        for index in range(1, count + 1):  # ADE file numbers start at 1
            rng = _sample_rng(seed, 'ade20k', split, index)
            stem = f'{ADE20K_SPLIT_PREFIX[split]}_{index:08d}'
            label = _ade20k_label(rng, size)
            _save_jpg(root / 'images' / split / f'{stem}.jpg', _colorize(label, palette, rng))
            _save_png(root / 'annotations' / split / f'{stem}.png', label)
    return root


# ----------------------------------------------------------------------------------------------
# COCO 2017 instances.
# ----------------------------------------------------------------------------------------------


def _polygon_in_box(rng: np.random.Generator, box: Tuple[float, float, float, float]) -> np.ndarray:
    """A simple polygon (rectangle or star-shaped n-gon) inside ``box``; (N, 2) float xy."""
    x0, y0, x1, y1 = box
    if rng.random() < 0.4:
        return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float64)
    num = int(rng.integers(3, 8))
    angles = (np.arange(num) + rng.uniform(-0.3, 0.3, num)) * (2 * np.pi / num) + rng.uniform(0, 2 * np.pi)
    radius = rng.uniform(0.7, 1.0, num)
    cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
    return np.stack([cx + rx * radius * np.cos(angles), cy + ry * radius * np.sin(angles)], axis=1)


def _polygon_area(xy: np.ndarray) -> float:
    """Area of a simple polygon (shoelace formula)."""
    x, y = xy[:, 0], xy[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def _coco_objects(rng: np.random.Generator, size: Size) -> list:
    """1-3 non-overlapping objects, one per vertical slot: (category id, polygon xy)."""
    h, w = size
    num = int(rng.integers(1, 4))
    slot = w / num
    objects = []
    for k in range(num):
        bw, bh = slot * rng.uniform(0.5, 0.85), h * rng.uniform(0.35, 0.8)
        x0 = k * slot + rng.uniform(0, slot - bw)
        y0 = rng.uniform(0, h - bh)
        xy = np.round(_polygon_in_box(rng, (x0, y0, x0 + bw, y0 + bh)), 2)
        objects.append((int(COCO_CATEGORIES[int(rng.integers(len(COCO_CATEGORIES)))][0]), xy))
    return objects


def _coco_image(rng: np.random.Generator, size: Size, objects: list, palette: Mapping[int, tuple]) -> np.ndarray:
    """Gradient background with each object's polygon filled in its category colour."""
    h, w = size
    top, bottom = rng.integers(0, 120, size=(2, 3))
    ramp = np.linspace(0, 1, h)[:, None, None]
    background = (top * (1 - ramp) + bottom * ramp) * np.ones((1, w, 1))
    canvas = Image.fromarray(background.astype(np.uint8))
    draw = ImageDraw.Draw(canvas)
    for category_id, xy in objects:
        draw.polygon([tuple(p) for p in xy.tolist()], fill=palette[category_id])
    rgb = np.asarray(canvas).astype(np.int16) + rng.integers(-8, 9, size=(h, w, 3), dtype=np.int16)
    return np.clip(rgb, 0, 255).astype(np.uint8)


def _coco_annotation(ann_id: int, image_id: int, category_id: int, xy: np.ndarray) -> dict:
    """One COCO instance annotation with a polygon segmentation and its xywh box."""
    (x0, y0), (x1, y1) = xy.min(axis=0), xy.max(axis=0)
    return {
        'id': ann_id,
        'image_id': image_id,
        'category_id': category_id,
        'bbox': [round(float(x0), 2), round(float(y0), 2), round(float(x1 - x0), 2), round(float(y1 - y0), 2)],
        'area': round(_polygon_area(xy), 2),
        'iscrowd': 0,
        'segmentation': [[round(float(v), 2) for v in xy.reshape(-1)]],
    }


def make_coco(
    root: PathLike,
    splits: Mapping[str, int] = COCO_SPLITS,
    size: Size = (64, 96),
    seed: int = 0,
) -> Path:
    """Write a tiny COCO 2017 (``{split}/{id:012d}.jpg`` + ``annotations/instances_{split}.json``); return ``root``.

    Image and annotation ids are unique across splits; categories are the real 80 (ids 1..90).
    """
    _check_splits(splits, ('train2017', 'val2017', 'test2017'), 'coco')
    root = Path(root)
    colors = _fixed_palette(len(COCO_CATEGORIES), 'coco')
    palette = {cat_id: tuple(int(c) for c in colors[i]) for i, (cat_id, _, _) in enumerate(COCO_CATEGORIES)}
    categories = [{'id': i, 'name': n, 'supercategory': s} for i, n, s in COCO_CATEGORIES]
    image_id, ann_id = 0, 0
    for split, count in splits.items():
        images, annotations = [], []
        for index in range(count):
            rng = _sample_rng(seed, 'coco', split, index)
            image_id += 1
            file_name = f'{image_id:012d}.jpg'
            objects = _coco_objects(rng, size)
            _save_jpg(root / split / file_name, _coco_image(rng, size, objects, palette))
            images.append({'id': image_id, 'file_name': file_name, 'height': size[0], 'width': size[1]})
            for category_id, xy in objects:
                ann_id += 1
                annotations.append(_coco_annotation(ann_id, image_id, category_id, xy))
        content = {
            'info': {'description': 'jetvit_mm synthetic COCO', 'version': '1.0', 'year': 2017},
            'licenses': [],
            'images': images,
            'annotations': annotations,
            'categories': categories,
        }
        _write_json(root / 'annotations' / f'instances_{split}.json', content)
    return root


# ----------------------------------------------------------------------------------------------
# Depth: NYU-Depth-V2 (mmseg layout) and DA-2K.
# ----------------------------------------------------------------------------------------------


def depth_scene(rng: np.random.Generator, size: Size) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An RGB image, its depth in metres (float32) and its object mask (bool).

    The background is a plane whose depth grows towards the top of the image; 1-3 objects
    (rectangles / ellipses) stand in front of it at constant depths, each nearer than the plane
    behind it; brightness falls with depth.
    """
    h, w = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    near, far, tilt = rng.uniform(0.8, 1.5), rng.uniform(4.0, 8.0), rng.uniform(-0.5, 0.5)
    depth = far - (far - near) * yy / max(h - 1, 1) + tilt * (xx / max(w - 1, 1) - 0.5)
    color = np.broadcast_to(rng.integers(60, 200, size=3).astype(np.float32), (h, w, 3)).copy()
    objects = []
    for _ in range(int(rng.integers(1, 4))):
        mask = _shape_mask(rng, size, _random_box(rng, size, 0.15, 0.4, min_px=6))
        objects.append((float(rng.uniform(0.4, 0.8) * depth[mask].min()), mask, rng.integers(60, 256, size=3)))
    object_mask = np.zeros((h, w), bool)
    for obj_depth, mask, obj_color in sorted(objects, key=lambda o: -o[0]):  # far to near: nearer ones occlude
        depth[mask], color[mask] = obj_depth, obj_color
        object_mask |= mask
    shading = np.clip(1.15 - 0.1 * depth, 0.3, 1.0)[..., None]
    rgb = color * shading + rng.integers(-6, 7, size=(h, w, 3))
    return np.clip(rgb, 0, 255).astype(np.uint8), depth.astype(np.float32), object_mask


def depth_to_png16(depth: np.ndarray, scale: float = NYU_DEPTH_SCALE) -> np.ndarray:
    """Metres -> uint16 (millimetres by default); 0 stays 0 (invalid)."""
    return np.clip(np.round(depth * scale), 0, np.iinfo(np.uint16).max).astype(np.uint16)


def _holes(rng: np.random.Generator, size: Size) -> np.ndarray:
    """1-3 small blobs without ground truth (True there), like missing sensor readings."""
    holes = np.zeros(size, bool)
    for _ in range(int(rng.integers(1, 4))):
        x0, y0, x1, y1 = _random_box(rng, size, 0.02, 0.08, min_px=2)
        holes[y0 : y1 + 1, x0 : x1 + 1] = True
    return holes


def _punch_holes(rng: np.random.Generator, depth_mm: np.ndarray) -> np.ndarray:
    """Set 1-3 small blobs to 0 (:func:`_holes`)."""
    out = depth_mm.copy()
    out[_holes(rng, depth_mm.shape)] = 0
    return out


def make_depth(
    root: PathLike,
    splits: Mapping[str, int] = NYU_SPLITS,
    size: Size = (48, 64),
    scenes: Sequence[str] = NYU_SCENES,
    seed: int = 0,
) -> Path:
    """Write a tiny NYU-Depth-V2 in mmseg's layout; return ``root``.

    ``images/{split}/{scene}_{seq:04d}_{frame:05d}.jpg`` and ``annotations/{split}/<same>.png``
    (uint16 millimetres, 0 = invalid); mmseg reads it with ``depth_rescale_factor=1e-3``.
    """
    _check_splits(splits, ('train', 'test'), 'nyu')
    root = Path(root)
    for split, count in splits.items():
        for index in range(count):
            rng = _sample_rng(seed, 'nyu', split, index)
            stem = f'{scenes[index % len(scenes)]}_{index // len(scenes) + 1:04d}_{index:05d}'
            rgb, depth, _ = depth_scene(rng, size)
            _save_jpg(root / 'images' / split / f'{stem}.jpg', rgb)
            _save_png(root / 'annotations' / split / f'{stem}.png', _punch_holes(rng, depth_to_png16(depth)))
    return root


def _closer_pair(rng: np.random.Generator, depth: np.ndarray, object_mask: np.ndarray) -> dict:
    """One DA-2K annotation: point1 on an object, point2 clearly farther; points are [h, w]."""
    flat = depth.reshape(-1)
    p1 = int(rng.choice(np.flatnonzero(object_mask.reshape(-1))))
    farther = np.flatnonzero(flat > 1.2 * flat[p1])
    p2 = int(rng.choice(farther)) if farther.size else int(np.argmax(flat))
    width = depth.shape[1]
    return {'point1': [p1 // width, p1 % width], 'point2': [p2 // width, p2 % width], 'closer_point': 'point1'}


def make_da2k(
    root: PathLike,
    images_per_scene: int = 1,
    scenes: Sequence[str] = DA2K_SCENES,
    pairs_per_image: int = 2,
    size: Size = (64, 96),
    seed: int = 0,
    save_depth: bool = False,
) -> Path:
    """Write a tiny DA-2K benchmark; return ``root``.

    ``images/{scene}/{index:04d}.jpg`` and ``annotations.json``: a JSON object mapping each image path
    relative to ``root`` (``"images/indoor/0000.jpg"``) to a list of
    ``{"point1": [h, w], "point2": [h, w], "closer_point": "point1"}`` (as in the real benchmark,
    point1 is always the closer one). Real image names differ; our names are an assumption. With
    ``save_depth`` the hidden depth is also written to ``depth/{scene}/{index:04d}.png`` (uint16 mm),
    which is not part of DA-2K.
    """
    unknown = sorted(set(scenes) - set(DA2K_SCENES))
    if unknown:
        raise ValueError(f'da2k: unknown scene(s) {unknown}; valid scenes are {list(DA2K_SCENES)}')
    root = Path(root)
    annotations = {}
    for scene in scenes:
        for index in range(images_per_scene):
            rng = _sample_rng(seed, 'da2k', scene, index)
            rel = f'images/{scene}/{index:04d}.jpg'
            rgb, depth, object_mask = depth_scene(rng, size)
            _save_jpg(root / rel, rgb)
            annotations[rel] = [_closer_pair(rng, depth, object_mask) for _ in range(pairs_per_image)]
            if save_depth:
                _save_png(root / 'depth' / scene / f'{index:04d}.png', depth_to_png16(depth))
    _write_json(root / 'annotations.json', annotations)
    return root


# ----------------------------------------------------------------------------------------------
# Zero-shot depth benchmarks at their original resolution (the JetViT paper's Table 4):
# DIODE, MPI Sintel, Cityscapes disparity.
# ----------------------------------------------------------------------------------------------


def make_diode(
    root: PathLike,
    split: str = 'val',
    scans_per_type: int = 1,
    views_per_scan: int = 2,
    size: Size = (96, 128),
    scene_types: Sequence[str] = DIODE_SCENE_TYPES,
    seed: int = 0,
) -> Path:
    """Write a tiny DIODE depth split; return ``root``.

    ``{split}/{indoors|outdoor}/scene_{s:05d}/scan_{c:05d}/{s:05d}_{c:05d}_{type}_{pos:03d}_{view:03d}.png`` with
    ``<name>_depth.npy`` (float32 metres, H x W x 1) and ``<name>_depth_mask.npy`` (float32, 1 = valid). Real images
    are 768x1024; the two last name fields are multiples of 10, as in the release. The depth under a 0 in the mask is
    left non-zero here, so only the mask says what is valid. Outdoor scenes are ten times deeper than indoor ones,
    and each image has a valid patch outside the scanner's 0.6-350 m range (0.3 m indoors, 400 m outdoors), so an
    evaluation's depth range changes its score.
    """
    _check_splits({split: 1}, ('train', 'val'), 'diode')
    unknown = sorted(set(scene_types) - set(DIODE_SCENE_TYPES))
    if unknown:
        raise ValueError(f'diode: unknown scene type(s) {unknown}; valid are {list(DIODE_SCENE_TYPES)}')
    root = Path(root)
    for t, scene_type in enumerate(scene_types):
        for scan in range(scans_per_type):
            scene_id, scan_id = 19 + 10 * t + scan, 183 + 10 * t + scan
            folder = root / split / scene_type / f'scene_{scene_id:05d}' / f'scan_{scan_id:05d}'
            for view in range(views_per_scan):
                rng = _sample_rng(seed, 'diode', split, scene_type, scan, view)
                rgb, depth, _ = depth_scene(rng, size)
                depth = depth * (10. if scene_type == 'outdoor' else 1.)
                x0, y0, x1, y1 = _random_box(rng, size, 0.05, 0.1, min_px=2)
                depth[y0 : y1 + 1, x0 : x1 + 1] = 400. if scene_type == 'outdoor' else 0.3
                name = f'{scene_id:05d}_{scan_id:05d}_{scene_type}_{10 * (view // 4):03d}_{10 * (view % 4):03d}'
                _save_png(folder / f'{name}.png', rgb)
                np.save(folder / f'{name}_depth.npy', depth[..., None].astype(np.float32))
                np.save(folder / f'{name}_depth_mask.npy', (~_holes(rng, size)).astype(np.float32))
    return root


def make_sintel_depth(
    root: PathLike,
    scenes: Sequence[str] = SINTEL_SCENES[:2],
    frames: int = 2,
    size: Size = (44, 104),
    seed: int = 0,
) -> Path:
    """Write a tiny MPI Sintel training set with depth; return ``root``.

    ``training/{clean,final}/{scene}/frame_{i:04d}.png`` (the images of MPI-Sintel-complete; ``final`` adds noise
    here where the real pass adds blur and atmosphere) and ``training/depth/{scene}/frame_{i:04d}.dpt`` (the depth
    release's format), frames numbered from 1. Real frames are 436x1024. Depth is dense, 2.4-24 units, except a far
    band in the top rows at 100 units, beyond the 72-unit cap of the shipped config, so the cap changes the score.
    """
    root = Path(root)
    for scene in scenes:
        for frame in range(1, frames + 1):
            rng = _sample_rng(seed, 'sintel', scene, frame)
            rgb, depth, _ = depth_scene(rng, size)
            depth = 3. * depth
            depth[: max(1, size[0] // 8)] = 100.
            name = f'frame_{frame:04d}'
            _save_png(root / 'training' / 'clean' / scene / f'{name}.png', rgb)
            final = np.clip(rgb.astype(np.int16) + rng.integers(-10, 11, size=rgb.shape), 0, 255).astype(np.uint8)
            _save_png(root / 'training' / 'final' / scene / f'{name}.png', final)
            write_sintel_dpt(root / 'training' / 'depth' / scene / f'{name}.dpt', depth)
    return root


def make_cityscapes_depth(
    root: PathLike,
    splits: Mapping[str, int] = MappingProxyType({'val': 2}),
    size: Size = (128, 256),
    seed: int = 0,
) -> Path:
    """Write a tiny Cityscapes with disparity ground truth; return ``root``.

    ``leftImg8bit/{split}/{city}/{stem}_leftImg8bit.png``, ``disparity/{split}/{city}/{stem}_disparity.png`` (uint16,
    ``p = 256 * disparity + 1``, 0 = no measurement) and ``camera/{split}/{city}/{stem}_camera.json``
    (:data:`CITYSCAPES_CAMERA`). Real images are 1024x2048. Depth is 8-80 m, except a far band in the top rows at
    ~110 m, beyond the 80 m cap of the shipped config, so the cap changes the score.
    """
    _check_splits(splits, tuple(CITYSCAPES_DEFAULT_CITIES), 'cityscapes')
    root = Path(root)
    baseline, fx = CITYSCAPES_CAMERA['extrinsic']['baseline'], CITYSCAPES_CAMERA['intrinsic']['fx']
    for split, count in splits.items():
        cities = CITYSCAPES_DEFAULT_CITIES[split]
        for index in range(count):
            rng = _sample_rng(seed, 'cityscapes_depth', split, index)
            city = cities[index % len(cities)]
            stem = f'{city}_{index:06d}_{19:06d}'
            rgb, depth, _ = depth_scene(rng, size)
            raw = depth_to_cityscapes_disparity(10. * depth, baseline, fx)
            raw[: max(1, size[0] // 8)] = depth_to_cityscapes_disparity(np.float32([110.]), baseline, fx)[0]
            raw[_holes(rng, size)] = 0
            _save_png(root / 'leftImg8bit' / split / city / f'{stem}_leftImg8bit.png', rgb)
            _save_png(root / 'disparity' / split / city / f'{stem}_disparity.png', raw)
            _write_json(root / 'camera' / split / city / f'{stem}_camera.json', dict(CITYSCAPES_CAMERA))
    return root
