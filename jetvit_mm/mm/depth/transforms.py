"""Depth transforms registered for mmcv pipelines: DepthAnythingV2's test-time resize, and the ground truth of the
zero-shot benchmarks (DIODE, MPI Sintel, Cityscapes) read by :mod:`jetvit_mm.depth.formats`."""
from typing import Dict, Optional

import mmcv
import numpy as np
from mmcv.image.geometric import cv2_interp_codes
from mmcv.transforms import BaseTransform

from jetvit_mm.depth.formats import read_cityscapes_depth, read_diode_depth, read_sintel_dpt
from jetvit_mm.models.depth_anything import depth_anything_input_size

from ..registry import TRANSFORMS

__all__ = ['DepthAnythingResize', 'LoadZeroShotDepth']


@TRANSFORMS.register_module()
class DepthAnythingResize(BaseTransform):
    """DepthAnythingV2's test-time resize of ``img``: short side to ``size`` keeping the aspect ratio, both sides
    rounded to multiples of ``multiple`` (never below ``size``), cv2 bicubic on float pixels (no uint8 rounding).

    ``size=None`` keeps each image's own short side, only rounded to the patch grid (DIODE 768x1024 -> 770x1022,
    Sintel 436x1024 -> 448x1022, Cityscapes 1024x2048 -> 1036x2044): the JetViT paper's protocol. Ground-truth maps
    keep their size: the estimator resizes the prediction back to the original image size, where metrics compare.
    """

    def __init__(self, size: Optional[int] = 518, multiple: int = 14, interpolation: str = 'bicubic') -> None:
        if interpolation not in cv2_interp_codes:
            raise ValueError(f'unknown interpolation {interpolation!r}; valid: {", ".join(cv2_interp_codes)}')
        if not ((size is None or isinstance(size, int) and size > 0) and isinstance(multiple, int) and multiple > 0):
            raise ValueError(f'size must be a positive int or None (original resolution) and multiple a positive '
                             f'int, got size={size!r}, multiple={multiple!r}')
        self.size, self.multiple, self.interpolation = size, multiple, interpolation

    def transform(self, results: dict) -> dict:
        img = results['img']
        h, w = img.shape[:2]
        try:
            new_h, new_w = depth_anything_input_size(h, w, min(h, w) if self.size is None else self.size,
                                                     self.multiple)
        except ValueError as err:
            raise ValueError(f'{results.get("img_path", "an image")}: {err}') from None
        results['img'] = mmcv.imresize(img.astype(np.float32), (new_w, new_h), interpolation=self.interpolation,
                                       backend='cv2')
        results['img_shape'] = (new_h, new_w)
        results['scale_factor'] = (new_w / w, new_h / h)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(size={self.size}, multiple={self.multiple}, interpolation={self.interpolation})'


@TRANSFORMS.register_module()
class LoadZeroShotDepth(BaseTransform):
    """Load the ground truth of a :class:`DIODEDepthDataset`, :class:`SintelDepthDataset` or
    :class:`CityscapesDepthDataset` sample (its ``depth_format``) into ``gt_depth_map``: float32, ``H x W``, in the
    dataset's unit (metres; Sintel's own unit), 0 where there is no ground truth (DIODE's validity mask, Cityscapes'
    missing or zero disparity). The map keeps the image's original size."""

    READERS = dict(
        diode=lambda r: read_diode_depth(r['depth_map_path'], r['depth_mask_path']),
        sintel=lambda r: read_sintel_dpt(r['depth_map_path']),
        cityscapes=lambda r: read_cityscapes_depth(r['depth_map_path'], r['camera_path']),
    )

    def transform(self, results: Dict) -> Dict:
        depth_format = results.get('depth_format')
        if depth_format not in self.READERS:
            raise KeyError(f'{results.get("img_path")}: depth_format {depth_format!r} is not one LoadZeroShotDepth '
                           f'reads ({", ".join(self.READERS)}); NYU-style PNG depth uses mmseg\'s LoadDepthAnnotation')
        depth = self.READERS[depth_format](results)
        if 'img' in results and results['img'].shape[:2] != depth.shape:
            raise ValueError(f'{results["img_path"]}: image {results["img"].shape[:2]} and ground truth '
                             f'{depth.shape} ({results["depth_map_path"]}) differ in size')
        results['gt_depth_map'] = depth
        results.setdefault('seg_fields', []).append('gt_depth_map')
        return results
