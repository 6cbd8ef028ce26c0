"""A data pipeline that names the image it fails on: the file's size is read from its header before it is decoded
(:func:`~jetvit_mm.image_checks.check_image_file`: above OpenCV's limits, the file, its size and the limit), and an
OpenCV error in a step (a 1x4000 image that a keep-ratio ``Resize`` turns into 0 rows) is raised again naming the
file, its size, the step and, for a keep-ratio resize, the shortest side it needs. Used by the datasets the tools
build (:func:`~jetvit_mm.mm.datasets.data_checks.build_checked_dataset`) and by ``tools/infer.py``."""
import math
import os.path as osp
from typing import Any, Optional, Sequence

import cv2
from mmengine.dataset import Compose

from jetvit_mm.image_checks import ImageSizeError, check_image_file

__all__ = ['CheckedPipeline', 'minimum_short_side']


def minimum_short_side(step: Any, long_side: int) -> Optional[int]:
    """The shortest short side that an image with a ``long_side`` needs to keep at least one pixel per side through
    ``step``, a keep-ratio resize to a ``(long, short)`` scale (mmcv's ``Resize``, ``RandomResize`` at the smallest
    ratio of its ``ratio_range``); None for other steps."""
    keep_ratio = getattr(step, 'keep_ratio', None)
    if keep_ratio is None:
        keep_ratio = (getattr(step, 'resize_cfg', None) or {}).get('keep_ratio')
    scale = getattr(step, 'scale', None)
    if not keep_ratio or not (isinstance(scale, (tuple, list)) and len(scale) == 2
                              and all(isinstance(s, (int, float)) for s in scale)):
        return None
    ratio = min(getattr(step, 'ratio_range', None) or (1., ))
    return math.ceil(long_side / (2 * max(scale) * ratio))  # the short side rounds to >= 1 pixel


def _size(results: dict) -> Optional[Sequence[int]]:
    shape = results.get('ori_shape')
    if shape is None and getattr(results.get('img'), 'shape', None) is not None:
        shape = results['img'].shape
    return tuple(int(s) for s in shape[:2]) if shape is not None else None


def describe_failure(step: Any, results: dict, error: Exception, name: Optional[str] = None) -> ImageSizeError:
    """The error for ``step`` failing with an OpenCV ``error`` on the image of ``results``: the file (``name``, else
    ``img_path``), its size, the step, OpenCV's words and, for a keep-ratio resize of a too-thin image, the shortest
    side that it needs."""
    where = name or results.get('img_path') or 'an image'
    size = _size(results)
    shown = f' ({size[0]}x{size[1]} pixels, height x width)' if size else ''
    text = ' '.join(str(error).split())
    message = f'{where}{shown}: the pipeline step {step!r} fails on it (OpenCV: {text})'
    needed = minimum_short_side(step, max(size)) if size else None
    if needed is not None and min(size) < needed:
        message += (f'; resized to its scale it keeps less than 1 pixel on its short side: with a long side of '
                    f'{max(size)} pixels this step needs a short side of at least {needed} pixels (crop or pad the '
                    f'image first)')
    return ImageSizeError(message)


class CheckedPipeline(Compose):
    """:class:`~mmengine.dataset.Compose` of the same steps that checks an image file's header size before the
    first step decodes it, and words an OpenCV error of a step naming the file (:func:`describe_failure`)."""

    def __init__(self, transforms: Sequence[Any], name: Optional[str] = None) -> None:
        super().__init__(list(transforms))
        self.name = name

    def __call__(self, data: dict) -> Optional[dict]:
        path = data.get('img_path') if isinstance(data, dict) and 'img' not in data else None
        if isinstance(path, str) and osp.isfile(path):
            check_image_file(path)
        for step in self.transforms:
            try:
                data = step(data)
            except cv2.error as error:
                raise describe_failure(step, data, error, self.name) from error
            if data is None:
                return None
        return data
