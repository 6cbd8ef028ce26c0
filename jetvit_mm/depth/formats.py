"""Readers of the ground-truth files of the depth benchmarks: the zero-shot sets
of the JetViT paper's Table 4 (DIODE, MPI Sintel, Cityscapes) and DA-2K's pair annotations. numpy + PIL only.

Every depth reader returns float32 depth in the dataset's unit with 0 where there is no ground truth, which is what
mmseg's depth pipeline and :class:`~jetvit_mm.mm.depth.AffineInvariantDepthMetric` expect.

- DIODE: ``<name>_depth.npy`` (float32 metres, ``H x W x 1``) and ``<name>_depth_mask.npy`` (``H x W``, 1 where the
  scanner returned a measurement).
- MPI Sintel: ``.dpt`` files of the Sintel depth release: a float32 tag 202021.25 (the bytes ``PIEH``, as in
  Sintel's ``.flo`` flow files), int32 width, int32 height, then ``height x width`` float32 depths, row-major,
  little-endian.
- DA-2K: ``annotations.json`` maps image paths to lists of ``{"point1": [h, w], "point2": [h, w],
  "closer_point": "point1" | "point2"}``.
- Cityscapes: ``<stem>_disparity.png`` (uint16; ``p > 0`` is the disparity ``(p - 1) / 256`` pixels, ``p = 0`` is no
  measurement) and ``<stem>_camera.json`` (``extrinsic.baseline`` in metres, ``intrinsic.fx`` in pixels); depth is
  ``baseline * fx / disparity``. A disparity of 0 (``p = 1``) is infinitely far and counts as no ground truth.
"""
from __future__ import annotations

import math
import os.path as osp
from pathlib import Path
from typing import Dict, List, Tuple, Union

import numpy as np
from PIL import Image

from jetvit_mm.image_checks import check_image_file
from jetvit_mm.jsonio import read_json_file

__all__ = ['CITYSCAPES_DISPARITY_SCALE', 'SINTEL_TAG', 'check_da2k_pair', 'cityscapes_disparity_to_depth',
           'image_size', 'read_cityscapes_camera', 'read_cityscapes_depth', 'read_da2k_annotations', 'read_diode_depth',
           'read_sintel_dpt']

PathLike = Union[str, Path]

SINTEL_TAG = 202021.25
CITYSCAPES_DISPARITY_SCALE = 256.


# ---------------------------------------------------------------------------------------------- DIODE
def read_diode_depth(depth_path: PathLike, mask_path: PathLike) -> np.ndarray:
    """DIODE depth in metres, ``H x W`` float32, 0 where the validity mask is 0."""
    depth = np.load(depth_path, allow_pickle=False)
    mask = np.load(mask_path, allow_pickle=False)
    if depth.ndim == 3 and depth.shape[-1] == 1:
        depth = depth[..., 0]
    if depth.ndim != 2:
        raise ValueError(f'{depth_path}: DIODE depth must be H x W x 1 (or H x W), got shape {depth.shape}')
    if mask.shape != depth.shape:
        raise ValueError(f'{mask_path}: validity mask {mask.shape} does not match the depth map {depth.shape} '
                         f'of {depth_path}')
    return np.where(mask > 0, depth, 0).astype(np.float32)


# ---------------------------------------------------------------------------------------------- MPI Sintel
def read_sintel_dpt(path: PathLike) -> np.ndarray:
    """A Sintel ``.dpt`` depth map, ``H x W`` float32."""
    raw = Path(path).read_bytes()
    if len(raw) < 12:
        raise ValueError(f'{path}: not a Sintel .dpt file ({len(raw)} bytes, the header alone is 12)')
    tag = np.frombuffer(raw, '<f4', count=1)[0]
    if tag != np.float32(SINTEL_TAG):
        raise ValueError(f'{path}: not a Sintel .dpt file (tag {tag}, expected {SINTEL_TAG})')
    width, height = (int(v) for v in np.frombuffer(raw, '<i4', count=2, offset=4))
    if not (0 < width < 100_000 and 0 < height < 100_000):
        raise ValueError(f'{path}: implausible size {width}x{height} in the .dpt header')
    expected = 12 + 4 * width * height
    if len(raw) != expected:
        hint = ' (two values per pixel: an optical-flow .flo file, which has the same tag)' \
            if len(raw) == 12 + 8 * width * height else ''
        raise ValueError(f'{path}: a {width}x{height} .dpt file has {expected} bytes, this one {len(raw)}{hint}')
    return np.frombuffer(raw, '<f4', offset=12).reshape(height, width).astype(np.float32)


# ---------------------------------------------------------------------------------------------- Cityscapes
def read_cityscapes_camera(path: PathLike) -> Tuple[float, float]:
    """``(baseline, fx)`` of a Cityscapes ``*_camera.json``."""
    camera = read_json_file(path, 'a Cityscapes camera file (extrinsic.baseline, intrinsic.fx)')
    try:
        baseline, fx = float(camera['extrinsic']['baseline']), float(camera['intrinsic']['fx'])
    except (KeyError, TypeError) as error:
        raise ValueError(f'{path}: a Cityscapes camera file needs extrinsic.baseline and intrinsic.fx '
                         f'(missing {error})') from None
    if not (baseline > 0 and fx > 0):
        raise ValueError(f'{path}: baseline and fx must be positive, got baseline={baseline}, fx={fx}')
    return baseline, fx


def cityscapes_disparity_to_depth(raw: np.ndarray, baseline: float, fx: float) -> np.ndarray:
    """Depth in metres from a raw Cityscapes disparity PNG (``uint16``); 0 where there is no measurement."""
    if raw.dtype != np.uint16:
        raise ValueError(f'Cityscapes disparity maps are uint16 PNGs, got {raw.dtype} (an 8-bit conversion loses '
                         f'the disparity)')
    disparity = (raw.astype(np.float64) - 1.) / CITYSCAPES_DISPARITY_SCALE
    depth = np.zeros(raw.shape, np.float64)
    valid = raw > 1
    depth[valid] = baseline * fx / disparity[valid]
    return depth.astype(np.float32)


def read_cityscapes_depth(disparity_path: PathLike, camera_path: PathLike) -> np.ndarray:
    """Cityscapes depth in metres, ``H x W`` float32, from the disparity PNG and its camera file (a PNG whose header
    claims more pixels than the decoder reads is refused naming it)."""
    check_image_file(disparity_path)
    with Image.open(disparity_path) as image:
        raw = np.array(image)
    if raw.dtype == np.int32:  # PIL opens 16-bit greyscale PNGs as mode 'I'
        raw = raw.astype(np.uint16)
    return cityscapes_disparity_to_depth(raw, *read_cityscapes_camera(camera_path))


# ---------------------------------------------------------------------------------------------- DA-2K
def image_size(path: PathLike) -> Tuple[int, int]:
    """``(height, width)`` as an image pipeline sees the image: OpenCV's loader applies the EXIF orientation. A file
    whose header claims more pixels than OpenCV decodes is refused naming it, its size and the limit."""
    check_image_file(path)
    with Image.open(path) as image:
        width, height = image.size
        if image.getexif().get(0x0112, 1) in (5, 6, 7, 8):  # rotated by 90 degrees: width and height swap
            width, height = height, width
    return height, width


def check_da2k_pair(pair: dict, size: Tuple[int, int], where: str) -> dict:
    """One DA-2K pair checked against its image size: ``{'point1': [row, col], 'point2': ..., 'closer_point'}``
    (fractional coordinates floored); a ValueError names ``where``, the pair and the point otherwise."""
    missing = [k for k in ('point1', 'point2', 'closer_point') if k not in pair]
    if missing:
        raise ValueError(f'{where}: missing {missing} (keys: {sorted(pair)})')
    if pair['closer_point'] not in ('point1', 'point2'):
        raise ValueError(f'{where}: closer_point must be "point1" or "point2", got {pair["closer_point"]!r}')
    out = dict(closer_point=pair['closer_point'])
    for name in ('point1', 'point2'):
        point = pair[name]
        if not (isinstance(point, (list, tuple)) and len(point) == 2):
            raise ValueError(f'{where}: {name} must be [h, w], got {point!r}')
        row, col = (int(math.floor(v)) for v in point)
        if not (0 <= row < size[0] and 0 <= col < size[1]):
            raise ValueError(f'{where}: {name} {list(point)} is outside the image ({size[0]}x{size[1]}, '
                             f'points are [h, w])')
        out[name] = [row, col]
    return out


def read_da2k_annotations(ann_file: PathLike, img_root: PathLike) -> List[Dict]:
    """``[{'img_path', 'da2k_pairs'}]`` of DA-2K's ``annotations.json``; every image must exist under ``img_root``
    and every point lie inside its image."""
    if not osp.isfile(ann_file):
        raise FileNotFoundError(f'DA-2K annotations not found: {ann_file}')
    annotations = read_json_file(ann_file, 'DA-2K annotations (an object mapping image paths to lists of pairs)')
    if not isinstance(annotations, dict):
        raise ValueError(f'{ann_file}: expected an object mapping image paths to lists of pairs')
    samples = []
    for rel, pairs in annotations.items():
        path = osp.join(img_root, rel)
        if not osp.isfile(path):
            raise FileNotFoundError(f'{ann_file}: image {rel!r} not found at {path}')
        size = image_size(path)
        checked = [check_da2k_pair(pair, size, f'{ann_file}: image {rel!r}: pair {i}') for i, pair in enumerate(pairs)]
        samples.append(dict(img_path=path, da2k_pairs=checked))
    return samples
