"""Tiny dataset generators: determinism, exact layouts and formats, and loading by mmseg / mmdet."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from jetvit_mm.demo.context_seg import CITYSCAPES_TRAIN_ID_TO_ID

from .conftest import REPO
from .fixtures.datasets import (
    ADE20K_NUM_CLASSES,
    COCO_CATEGORIES,
    DA2K_SCENES,
    NYU_SCENES,
    make_ade20k,
    make_cityscapes,
    make_cityscapes_depth,
    make_coco,
    make_da2k,
    make_depth,
    make_diode,
    make_sintel_depth,
)

GENERATORS = {
    'cityscapes': make_cityscapes,
    'ade20k': make_ade20k,
    'coco': make_coco,
    'nyu': make_depth,
    'da2k': make_da2k,
    'diode': make_diode,
    'sintel': make_sintel_depth,
    'cityscapes_depth': make_cityscapes_depth,
}


def _digests(root: Path) -> dict:
    """Relative path -> sha256 of every file under ``root``."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob('*'))
        if p.is_file()
    }


def _files(root: Path, pattern: str = '*') -> list:
    """Sorted relative paths of the files under ``root`` matching ``pattern``."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(pattern) if p.is_file())


def _array(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path))


# ----------------------------------------------------------------------------------------------
# Determinism and import cost.
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize('name', sorted(GENERATORS))
def test_same_seed_gives_identical_bytes(tmp_path, name):
    make = GENERATORS[name]
    first = _digests(make(tmp_path / 'a', seed=3))
    again = _digests(make(tmp_path / 'b', seed=3))
    other = _digests(make(tmp_path / 'c', seed=4))
    assert first and first == again
    assert other.keys() == first.keys()
    assert any(other[k] != first[k] for k in first)


def test_sample_does_not_depend_on_other_splits(tmp_path):
    both = _digests(make_cityscapes(tmp_path / 'both', splits={'train': 3, 'val': 2}))
    val_only = _digests(make_cityscapes(tmp_path / 'val', splits={'val': 2}))
    assert val_only == {k: v for k, v in both.items() if '/val/' in k}


def test_unknown_split_raises(tmp_path):
    with pytest.raises(ValueError, match='valid splits'):
        make_ade20k(tmp_path, splits={'train': 1})
    with pytest.raises(ValueError, match='valid scenes'):
        make_da2k(tmp_path, scenes=('kitchen',))
    with pytest.raises(ValueError, match=r"unknown scene type\(s\) \['indoor'\]; valid are \['indoors', 'outdoor'\]"):
        make_diode(tmp_path, scene_types=('indoor',))
    with pytest.raises(ValueError, match='valid splits'):
        make_cityscapes_depth(tmp_path, splits={'training': 1})


@pytest.mark.integration
def test_import_is_cheap():
    code = (
        'import sys, jetvit_mm.demo.context_seg, tests.fixtures.datasets; '
        "bad = [m for m in sys.modules if m.split('.')[0] in ('mmengine', 'mmseg', 'mmdet', 'mmcv', 'torch')]; "
        'assert not bad, bad'
    )
    subprocess.run([sys.executable, '-c', code], check=True, cwd=REPO)


# ----------------------------------------------------------------------------------------------
# Layouts and formats (numpy / PIL / pycocotools only).
# ----------------------------------------------------------------------------------------------


def test_cityscapes_layout_and_labels(tmp_path):
    root = make_cityscapes(tmp_path, splits={'train': 2, 'val': 1}, size=(32, 48), cities=('aachen',))
    stems = [f'{split}/aachen/aachen_{i:06d}_000019' for split, i in (('train', 0), ('train', 1), ('val', 0))]
    assert _files(root / 'leftImg8bit') == sorted(f'{s}_leftImg8bit.png' for s in stems)
    assert _files(root / 'gtFine') == sorted(
        f'{s}_gtFine_{kind}.png' for s in stems for kind in ('labelIds', 'labelTrainIds')
    )
    seen = set()
    for stem in stems:
        image = Image.open(root / 'leftImg8bit' / f'{stem}_leftImg8bit.png')
        assert (image.mode, image.size) == ('RGB', (48, 32))
        train_ids = _array(root / 'gtFine' / f'{stem}_gtFine_labelTrainIds.png')
        label_ids = _array(root / 'gtFine' / f'{stem}_gtFine_labelIds.png')
        assert train_ids.dtype == label_ids.dtype == np.uint8 and train_ids.shape == (32, 48)
        assert set(np.unique(train_ids)) <= set(range(19)) | {255}
        lut = {**dict(enumerate(CITYSCAPES_TRAIN_ID_TO_ID)), 255: 0}
        np.testing.assert_array_equal(label_ids, np.vectorize(lut.get)(train_ids))
        seen |= set(np.unique(train_ids).tolist())
    assert 255 in seen and len(seen) > 4


def test_cityscapes_default_cities():
    from jetvit_mm.demo.context_seg import CITYSCAPES_DEFAULT_CITIES

    assert CITYSCAPES_DEFAULT_CITIES['val'] == ('frankfurt', 'lindau')


def test_ade20k_layout_and_labels(tmp_path):
    root = make_ade20k(tmp_path, size=(40, 56))
    names = [f'ADE_train_{i:08d}' for i in range(1, 5)]
    val_names = [f'ADE_val_{i:08d}' for i in range(1, 3)]
    assert _files(root / 'images') == [f'training/{n}.jpg' for n in names] + [f'validation/{n}.jpg' for n in val_names]
    assert _files(root / 'annotations') == [f'training/{n}.png' for n in names] + [
        f'validation/{n}.png' for n in val_names
    ]
    for label_path in (root / 'annotations').rglob('*.png'):
        label = _array(label_path)
        assert label.dtype == np.uint8 and label.shape == (40, 56)
        assert label.max() <= ADE20K_NUM_CLASSES and (label == 0).any() and (label > 0).any()
        image = Image.open(root / 'images' / label_path.parent.name / f'{label_path.stem}.jpg')
        assert (image.format, image.mode, image.size) == ('JPEG', 'RGB', (56, 40))


def test_coco_annotations_are_valid(tmp_path):
    from pycocotools.coco import COCO

    size = (48, 80)
    root = make_coco(tmp_path, splits={'train2017': 3, 'val2017': 4}, size=size)
    assert _files(root, '*.json') == ['annotations/instances_train2017.json', 'annotations/instances_val2017.json']
    all_image_ids, all_ann_ids = [], []
    for split in ('train2017', 'val2017'):
        coco = COCO(str(root / 'annotations' / f'instances_{split}.json'))
        cat_ids = coco.getCatIds()
        assert len(cat_ids) == 80 and cat_ids[0] == 1 and cat_ids[-1] == 90
        assert [c['name'] for c in coco.loadCats(cat_ids)] == [name for _, name, _ in COCO_CATEGORIES]
        assert _files(root / split) == sorted(img['file_name'] for img in coco.dataset['images'])
        for image_id in coco.getImgIds():
            info = coco.loadImgs(image_id)[0]
            assert info['file_name'] == f'{image_id:012d}.jpg'
            assert Image.open(root / split / info['file_name']).size == (info['width'], info['height']) == size[::-1]
            anns = coco.loadAnns(coco.getAnnIds(imgIds=image_id))
            assert 1 <= len(anns) <= 3
            for ann in anns:
                _check_coco_annotation(coco, ann, info, set(cat_ids))
            all_ann_ids += [a['id'] for a in anns]
        all_image_ids += coco.getImgIds()
    assert len(set(all_image_ids)) == len(all_image_ids) == 7
    assert len(set(all_ann_ids)) == len(all_ann_ids)


def _check_coco_annotation(coco, ann: dict, info: dict, cat_ids: set) -> None:
    """Box inside the image and tight around the polygon; polygon mask area close to ``area``."""
    x, y, w, h = ann['bbox']
    assert ann['category_id'] in cat_ids and ann['iscrowd'] == 0
    assert 0 <= x and 0 <= y and w >= 1 and h >= 1 and x + w <= info['width'] and y + h <= info['height']
    (poly,) = ann['segmentation']
    xy = np.asarray(poly).reshape(-1, 2)
    assert len(poly) >= 6 and len(poly) % 2 == 0
    np.testing.assert_allclose([*xy.min(0), *(xy.max(0) - xy.min(0))], ann['bbox'], atol=0.011)
    mask = coco.annToMask(ann)
    assert ann['area'] > 0 and abs(mask.sum() - ann['area']) <= 2 * (w + h) + 4


def test_depth_layout_and_values(tmp_path):
    root = make_depth(tmp_path, splits={'train': 3, 'test': 2}, size=(30, 40))
    stems = {'train': ['bathroom_0001_00000', 'bedroom_0001_00001', 'kitchen_0001_00002'],
             'test': ['bathroom_0001_00000', 'bedroom_0001_00001']}  # fmt: skip
    assert _files(root / 'images') == sorted(f'{s}/{n}.jpg' for s, ns in stems.items() for n in ns)
    assert _files(root / 'annotations') == sorted(f'{s}/{n}.png' for s, ns in stems.items() for n in ns)
    for path in (root / 'annotations').rglob('*.png'):
        assert Image.open(path).mode == 'I;16'
        depth = _array(path)
        assert depth.dtype == np.uint16 and depth.shape == (30, 40)
        valid = depth[depth > 0]
        assert (depth == 0).any() and 0.9 < valid.size / depth.size < 1
        assert valid.min() >= 300 and valid.max() <= 9000  # millimetres, 0.3 m .. 9 m
    assert all(n.split('_0')[0] in NYU_SCENES for ns in stems.values() for n in ns)


def test_da2k_layout_and_pairs(tmp_path):
    root = make_da2k(tmp_path, images_per_scene=2, pairs_per_image=3, size=(40, 50), save_depth=True)
    annotations = json.loads((root / 'annotations.json').read_text())
    assert sorted(annotations) == _files(root, '*.jpg') == sorted(
        f'images/{scene}/{i:04d}.jpg' for scene in DA2K_SCENES for i in range(2)
    )
    for rel, pairs in annotations.items():
        assert Image.open(root / rel).size == (50, 40) and len(pairs) == 3
        depth = _array(root / 'depth' / Path(rel).relative_to('images').with_suffix('.png'))
        for pair in pairs:
            assert set(pair) == {'point1', 'point2', 'closer_point'} and pair['closer_point'] == 'point1'
            (h1, w1), (h2, w2) = pair['point1'], pair['point2']
            assert 0 <= h1 < 40 and 0 <= h2 < 40 and 0 <= w1 < 50 and 0 <= w2 < 50
            assert depth[h1, w1] < depth[h2, w2]
    assert not (make_da2k(tmp_path / 'plain', scenes=('indoor',)) / 'depth').exists()


# ----------------------------------------------------------------------------------------------
# The frameworks' own dataset classes read the generated data.
# ----------------------------------------------------------------------------------------------


def _seg_pipeline(**annotation_kwargs) -> list:
    from mmcv.transforms import LoadImageFromFile
    from mmseg.datasets.transforms import LoadAnnotations

    return [LoadImageFromFile(), LoadAnnotations(**annotation_kwargs)]


def test_mmseg_cityscapes_dataset_reads_it(tmp_path):
    from mmseg.datasets import CityscapesDataset

    root = make_cityscapes(tmp_path, size=(32, 64))
    for split, count in (('train', 4), ('val', 2)):
        dataset = CityscapesDataset(
            data_root=str(root),
            data_prefix=dict(img_path=f'leftImg8bit/{split}', seg_map_path=f'gtFine/{split}'),
            pipeline=_seg_pipeline(),
        )
        assert len(dataset) == count
        for sample in dataset:
            assert sample['img'].shape == (32, 64, 3)
            np.testing.assert_array_equal(sample['gt_seg_map'], _array(Path(sample['seg_map_path'])))
            assert sample['seg_map_path'].endswith('_gtFine_labelTrainIds.png')


@pytest.mark.filterwarnings('ignore:`reduce_zero_label` will be deprecated')
def test_mmseg_ade20k_dataset_reduces_zero_label(tmp_path):
    from mmseg.datasets import ADE20KDataset

    root = make_ade20k(tmp_path, size=(40, 48))
    dataset = ADE20KDataset(
        data_root=str(root),
        data_prefix=dict(img_path='images/validation', seg_map_path='annotations/validation'),
        pipeline=_seg_pipeline(reduce_zero_label=True),
    )
    assert len(dataset) == 2
    for sample in dataset:
        raw = _array(Path(sample['seg_map_path'])).astype(np.int64)
        assert sample['img'].shape == (40, 48, 3)
        np.testing.assert_array_equal(sample['gt_seg_map'], np.where(raw == 0, 255, raw - 1))
        assert (sample['gt_seg_map'] == 255).any() and sample['gt_seg_map'][sample['gt_seg_map'] != 255].max() < 150


def test_mmseg_nyu_dataset_reads_it(tmp_path):
    from mmcv.transforms import LoadImageFromFile
    from mmseg.datasets import NYUDataset
    from mmseg.datasets.transforms import LoadDepthAnnotation

    root = make_depth(tmp_path, size=(30, 40))
    for split, count in (('train', 4), ('test', 2)):
        dataset = NYUDataset(
            data_root=str(root),
            data_prefix=dict(img_path=f'images/{split}', depth_map_path=f'annotations/{split}'),
            pipeline=[LoadImageFromFile(), LoadDepthAnnotation(depth_rescale_factor=1e-3)],
        )
        assert len(dataset) == count
        for sample in dataset:
            assert sample['img'].shape == (30, 40, 3) and sample['gt_depth_map'].dtype == np.float32
            expected = _array(Path(sample['depth_map_path'])).astype(np.float32) * 1e-3
            np.testing.assert_allclose(sample['gt_depth_map'], expected, rtol=1e-6)
            scene = Path(sample['img_path']).name.split('_0')[0]
            assert sample['category_id'] == dataset.metainfo['classes'].index(scene)


def test_mmdet_coco_dataset_reads_it(tmp_path):
    from mmcv.transforms import LoadImageFromFile
    from mmdet.datasets import CocoDataset
    from mmdet.datasets.transforms import LoadAnnotations

    root = make_coco(tmp_path, size=(48, 80))
    classes = CocoDataset.METAINFO['classes']
    assert tuple(name for _, name, _ in COCO_CATEGORIES) == classes
    for split, count in (('train2017', 4), ('val2017', 2)):
        dataset = CocoDataset(
            data_root=str(root),
            ann_file=f'annotations/instances_{split}.json',
            data_prefix=dict(img=f'{split}/'),
            pipeline=[LoadImageFromFile(), LoadAnnotations(with_bbox=True, with_mask=True)],
        )
        assert len(dataset) == count
        content = json.loads((root / 'annotations' / f'instances_{split}.json').read_text())
        names = {c['id']: c['name'] for c in content['categories']}
        for sample in dataset:
            anns = [a for a in content['annotations'] if a['image_id'] == sample['img_id']]
            assert sample['img'].shape == (48, 80, 3)
            boxes = sample['gt_bboxes'].tensor.numpy()
            expected = [[x, y, x + w, y + h] for x, y, w, h in (a['bbox'] for a in anns)]
            np.testing.assert_allclose(boxes, expected, atol=1e-4)
            assert sample['gt_bboxes_labels'].tolist() == [classes.index(names[a['category_id']]) for a in anns]
            masks = sample['gt_masks'].to_ndarray()
            assert masks.shape == (len(anns), 48, 80) and (masks.reshape(len(anns), -1).sum(1) > 0).all()
