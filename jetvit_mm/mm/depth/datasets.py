"""Depth datasets registered for mmengine: DA-2K's pairs and the zero-shot relative-depth benchmarks of the JetViT
paper's Table 4 at their original resolution (DIODE, MPI Sintel, Cityscapes), read from their official releases
without conversion; ``LoadZeroShotDepth`` reads their ground truth.

Layouts (``data_root`` is the folder holding them; each dataset's ``data_prefix`` gives the sub-folders):

- DIODE (``val.tar.gz``): ``val/{indoors,outdoor}/scene_*/scan_*/<name>.png``, ``<name>_depth.npy``,
  ``<name>_depth_mask.npy``.
- MPI Sintel: images from MPI-Sintel-complete (``training/final/<scene>/frame_XXXX.png``, or ``training/clean``),
  depth from MPI-Sintel-depth-training (``training/depth/<scene>/frame_XXXX.dpt``), unpacked into one folder.
- Cityscapes: ``leftImg8bit/val/<city>/<stem>_leftImg8bit.png``, ``disparity/val/<city>/<stem>_disparity.png``,
  ``camera/val/<city>/<stem>_camera.json`` (``leftImg8bit_trainvaltest.zip``, ``disparity_trainvaltest.zip``,
  ``camera_trainvaltest.zip``).
"""
import glob
import os
import os.path as osp
from typing import List, Optional, Sequence

from mmengine.dataset import BaseDataset

from jetvit_mm.depth.formats import read_da2k_annotations

from ..registry import DATASETS

__all__ = ['CityscapesDepthDataset', 'DA2KDataset', 'DIODEDepthDataset', 'SintelDepthDataset']


@DATASETS.register_module()
class DA2KDataset(BaseDataset):
    """DA-2K: ``annotations.json`` maps image paths (relative to ``data_root``) to lists of
    ``{"point1": [h, w], "point2": [h, w], "closer_point": "point1" | "point2"}``.

    Each sample carries ``da2k_pairs`` (add it to ``PackSegInputs``' ``meta_keys``) for ``DA2KMetric``.
    At load time every image must exist and every point must lie inside its image (integer pixel ``[row, col]``;
    fractional coordinates are floored); otherwise a ValueError names the file, the pair and the point
    (:func:`~jetvit_mm.depth.formats.read_da2k_annotations`).
    """

    METAINFO = dict(name='DA-2K')

    def __init__(self, ann_file: str = 'annotations.json', **kwargs) -> None:
        super().__init__(ann_file=ann_file, **kwargs)

    def load_data_list(self) -> List[dict]:
        img_root = self.data_prefix.get('img_path', '') or self.data_root
        return [dict(sample, seg_fields=[]) for sample in read_da2k_annotations(self.ann_file, img_root)]


def _existing_dir(path: str, what: str, layout: str) -> str:
    if not osp.isdir(path):
        raise FileNotFoundError(f'{what} not found: {path} (expected layout: {layout})')
    return path


def _require(path: str, image: str) -> str:
    if not osp.isfile(path):
        raise FileNotFoundError(f'ground truth of {image} not found: {path}')
    return path


def _non_empty(data_list: List[dict], where: str, pattern: str) -> List[dict]:
    if not data_list:
        raise FileNotFoundError(f'no images matching {pattern} under {where}')
    return data_list


@DATASETS.register_module()
class DIODEDepthDataset(BaseDataset):
    """DIODE depth (``val`` split by default) in its release layout, both scene types or one of them.

    Args:
        scene_types: ``('indoors', 'outdoor')`` or one of them.
        data_prefix: ``img_path``: the split folder under ``data_root`` (default ``val``).
    """

    METAINFO = dict(name='DIODE')
    SCENE_TYPES = ('indoors', 'outdoor')
    LAYOUT = 'val/{indoors,outdoor}/scene_*/scan_*/<name>.png with <name>_depth.npy and <name>_depth_mask.npy'

    def __init__(self, scene_types: Sequence[str] = SCENE_TYPES, data_prefix: Optional[dict] = None,
                 **kwargs) -> None:
        scene_types = (scene_types,) if isinstance(scene_types, str) else tuple(scene_types)
        unknown = [t for t in scene_types if t not in self.SCENE_TYPES]
        if unknown or not scene_types:
            raise ValueError(f'unknown DIODE scene type(s) {unknown or list(scene_types)}; valid: '
                             f'{", ".join(self.SCENE_TYPES)}')
        self.scene_types = scene_types
        super().__init__(data_prefix=dict(dict(img_path='val'), **(data_prefix or {})), **kwargs)

    def load_data_list(self) -> List[dict]:
        root = _existing_dir(self.data_prefix['img_path'], 'DIODE split folder', self.LAYOUT)
        data_list = []
        for scene_type in self.scene_types:
            images = glob.glob(osp.join(root, scene_type, 'scene_*', 'scan_*', '*.png'))
            for image in sorted(images):
                stem = image[:-len('.png')]
                data_list.append(dict(img_path=image, depth_map_path=_require(f'{stem}_depth.npy', image),
                                      depth_mask_path=_require(f'{stem}_depth_mask.npy', image),
                                      depth_format='diode', scene_type=scene_type, seg_fields=[]))
        return _non_empty(data_list, root, f'{{{",".join(self.scene_types)}}}/scene_*/scan_*/*.png')


@DATASETS.register_module()
class SintelDepthDataset(BaseDataset):
    """MPI Sintel's training set with its depth release (the only split with depth), the ``final`` pass by default.

    Args:
        scenes: a subset of scene folders (e.g. ``('alley_1', 'market_6')``); None = every scene with images.
        data_prefix: ``img_path`` (default ``training/final``; or ``training/clean``) and ``depth_map_path``
            (default ``training/depth``) under ``data_root``; a key left out keeps its default.
    """

    METAINFO = dict(name='MPI Sintel')
    LAYOUT = 'training/final/<scene>/frame_XXXX.png and training/depth/<scene>/frame_XXXX.dpt'

    def __init__(self, scenes: Optional[Sequence[str]] = None, data_prefix: Optional[dict] = None, **kwargs) -> None:
        self.scenes = None if scenes is None else ((scenes,) if isinstance(scenes, str) else tuple(scenes))
        defaults = dict(img_path='training/final', depth_map_path='training/depth')
        super().__init__(data_prefix=dict(defaults, **(data_prefix or {})), **kwargs)

    def load_data_list(self) -> List[dict]:
        img_root = _existing_dir(self.data_prefix['img_path'], 'Sintel image folder', self.LAYOUT)
        depth_root = _existing_dir(self.data_prefix['depth_map_path'], 'Sintel depth folder', self.LAYOUT)
        available = sorted(d for d in os.listdir(img_root) if osp.isdir(osp.join(img_root, d)))
        scenes = available if self.scenes is None else list(self.scenes)
        missing = [s for s in scenes if s not in available]
        if missing:
            raise ValueError(f'Sintel scene(s) {missing} not in {img_root}; available: {", ".join(available)}')
        data_list = []
        for scene in scenes:
            for image in sorted(glob.glob(osp.join(img_root, scene, 'frame_*.png'))):
                name = osp.splitext(osp.basename(image))[0]
                data_list.append(dict(img_path=image, depth_map_path=_require(
                    osp.join(depth_root, scene, f'{name}.dpt'), image), depth_format='sintel', scene=scene,
                    seg_fields=[]))
        return _non_empty(data_list, img_root, '<scene>/frame_*.png')


@DATASETS.register_module()
class CityscapesDepthDataset(BaseDataset):
    """Cityscapes (``val`` by default) with depth from its stereo disparity and camera files.

    Args:
        data_prefix: ``img_path`` (default ``leftImg8bit/val``), ``depth_map_path`` (``disparity/val``) and
            ``camera_path`` (``camera/val``) under ``data_root``; a key left out keeps its default.
    """

    METAINFO = dict(name='Cityscapes depth')
    LAYOUT = ('leftImg8bit/val/<city>/<stem>_leftImg8bit.png, disparity/val/<city>/<stem>_disparity.png, '
              'camera/val/<city>/<stem>_camera.json')

    def __init__(self, data_prefix: Optional[dict] = None, **kwargs) -> None:
        defaults = dict(img_path='leftImg8bit/val', depth_map_path='disparity/val', camera_path='camera/val')
        super().__init__(data_prefix=dict(defaults, **(data_prefix or {})), **kwargs)

    def load_data_list(self) -> List[dict]:
        img_root = _existing_dir(self.data_prefix['img_path'], 'Cityscapes image folder', self.LAYOUT)
        data_list = []
        for image in sorted(glob.glob(osp.join(img_root, '*', '*_leftImg8bit.png'))):
            city, name = osp.basename(osp.dirname(image)), osp.basename(image)[:-len('_leftImg8bit.png')]
            data_list.append(dict(
                img_path=image,
                depth_map_path=_require(osp.join(self.data_prefix['depth_map_path'], city, f'{name}_disparity.png'),
                                        image),
                camera_path=_require(osp.join(self.data_prefix['camera_path'], city, f'{name}_camera.json'), image),
                depth_format='cityscapes', seg_fields=[]))
        return _non_empty(data_list, img_root, '<city>/*_leftImg8bit.png')
