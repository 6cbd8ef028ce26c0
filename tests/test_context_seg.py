"""The demo's context task: Cityscapes layout read by mmseg, determinism, and labels that need the distant cue."""
import hashlib
from pathlib import Path
from typing import Optional, Tuple

import numpy as np
import pytest
from PIL import Image

from jetvit_mm.demo.context_seg import (
    BACKGROUND,
    CORNERS,
    CUE_COLORS,
    DISTRACTOR_COLORS,
    MARKER,
    NUM_CUES,
    NUM_TASK_CLASSES,
    SHAPES,
    context_seg_sample,
    corner_sample,
    make_context_seg,
    object_class,
    partner_sample,
)
from jetvit_mm.demo.context_seg import _exclusion_block as exclusion_block

SPLITS = {'train': 6, 'val': 3}


def read_color_cue(image: np.ndarray, box: Tuple[int, int, int, int]) -> Optional[int]:
    """The cue whose colour fills ``box`` of ``image`` (each channel's mean within 40), or None."""
    y0, x0, y1, x1 = box
    mean = image[y0:y1, x0:x1].astype(np.float64).mean((0, 1))
    for cue, color in enumerate(CUE_COLORS):
        if np.abs(mean - np.asarray(color)).max() < 40:
            return cue
    return None


def read_corner_cue(image: np.ndarray, exclusion: int = 32, min_pixels: int = 64) -> Optional[int]:
    """The marker's cue index read back from the pixels alone: the cue colour of which a corner block holds at
    least ``min_pixels`` pixels (within 40 per channel), or None."""
    h, w = image.shape[:2]
    rgb = image.astype(np.int16)
    for corner in CORNERS:
        y0, x0, y1, x1 = exclusion_block(corner, (h, w), exclusion)
        block = rgb[y0:y1, x0:x1]
        for cue, color in enumerate(CUE_COLORS):
            if (np.abs(block - np.asarray(color)).max(-1) < 40).sum() >= min_pixels:
                return cue
    return None


def _digests(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob('*')) if p.is_file()}


@pytest.fixture(scope='module')
def root(tmp_path_factory) -> Path:
    return make_context_seg(tmp_path_factory.mktemp('context_seg'), splits=SPLITS, seed=0)


def test_cityscapes_layout(root):
    images = sorted(p.relative_to(root).as_posix() for p in root.rglob('*_leftImg8bit.png'))
    assert len(images) == sum(SPLITS.values())
    assert images[0] == 'leftImg8bit/train/aachen/aachen_000000_000019_leftImg8bit.png'
    for rel in images:
        stem = rel.replace('leftImg8bit/', 'gtFine/', 1).replace('_leftImg8bit.png', '_gtFine_')
        train_ids = np.asarray(Image.open(root / (stem + 'labelTrainIds.png')))
        label_ids = np.asarray(Image.open(root / (stem + 'labelIds.png')))
        assert train_ids.shape == (64, 128) and train_ids.dtype == np.uint8
        assert train_ids.max() < NUM_TASK_CLASSES and label_ids.shape == train_ids.shape
        assert Image.open(root / rel).mode == 'RGB'


def test_mmseg_cityscapes_dataset_reads_it(root):
    from mmcv.transforms import LoadImageFromFile
    from mmseg.datasets import CityscapesDataset
    from mmseg.datasets.transforms import LoadAnnotations

    for split, count in SPLITS.items():
        dataset = CityscapesDataset(data_root=str(root), pipeline=[LoadImageFromFile(), LoadAnnotations()],
                                    data_prefix=dict(img_path=f'leftImg8bit/{split}', seg_map_path=f'gtFine/{split}'))
        assert len(dataset) == count
        for sample in dataset:
            assert sample['img'].shape == (64, 128, 3)
            np.testing.assert_array_equal(sample['gt_seg_map'], np.asarray(Image.open(sample['seg_map_path'])))


def test_demo_configs_read_it(root):
    """The demo's configs (Cityscapes dataset, its pipelines) load the generated files."""
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    from mmengine.runner import Runner

    import jetvit_mm.mm  # noqa: F401  (registers the project's modules)

    cfg = Config.fromfile(Path(__file__).resolve().parents[1] / 'configs' / 'demo' / 'probe_context_seg.py')
    cfg.val_dataloader.dataset.data_root = str(root)
    with DefaultScope.overwrite_default_scope('mmseg'):
        loader = Runner.build_dataloader(cfg.val_dataloader)
        batch = next(iter(loader))
    assert len(loader.dataset) == SPLITS['val']
    assert batch['inputs'][0].shape == (3, 64, 128)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, root):
    again = make_context_seg(tmp_path / 'again', splits=SPLITS, seed=0)
    assert _digests(again) == _digests(root)
    other = make_context_seg(tmp_path / 'other', splits=SPLITS, seed=1)
    assert _digests(other) != _digests(root)
    # a sample does not depend on the size of the other splits
    bigger = make_context_seg(tmp_path / 'bigger', splits={'train': 2, 'val': 5}, seed=0)
    first_train = 'leftImg8bit/train/aachen/aachen_000000_000019_leftImg8bit.png'
    assert _digests(bigger)[first_train] == _digests(root)[first_train]


def test_unknown_split_and_bad_sizes_are_refused(tmp_path):
    with pytest.raises(ValueError, match='unknown split'):
        make_context_seg(tmp_path, splits={'training': 1})
    with pytest.raises(ValueError, match='unknown task'):
        make_context_seg(tmp_path, task='mirror')
    with pytest.raises(ValueError, match='exclusion'):
        corner_sample(0, 'train', 0, size=(48, 128))
    with pytest.raises(ValueError, match='multiple'):
        partner_sample(0, 'train', 0, size=(64, 112))
    with pytest.raises(ValueError):
        object_class(len(SHAPES), 0)


def _window(y: int, x: int, window_px: int) -> tuple:
    return y // window_px, x // window_px


@pytest.mark.parametrize('size', [(64, 128), (128, 256)])
def test_partner_label_is_a_function_of_the_partner_half_the_image_away(size):
    """Each object's label is object_class(its texture, the colour read from the patch half the width away in its
    row); that patch never shares a window (up to half the grid wide) with the object; every texture takes every
    class as the partner changes, so the object's own pixels cannot tell its class."""
    h, w = size
    seen = {shape: set() for shape in range(len(SHAPES))}
    for index in range(150):
        image, label, meta = partner_sample(0, 'train', index, size=size)
        assert 2 <= len(meta['objects']) <= 4
        marked = np.zeros(label.shape, bool)
        for obj in meta['objects']:
            y0, x0, y1, x1 = obj['box']
            py0, px0, py1, px1 = obj['partner_box']
            assert (y1 - y0, x1 - x0) == (16, 16) and y0 % 16 == 0 and x0 % 16 == 0
            assert py0 == y0 and abs(px0 - x0) == w // 2  # same row, half the width away
            cue = read_color_cue(image, obj['partner_box'])
            assert cue == obj['cue']
            assert (label[y0:y1, x0:x1] == object_class(obj['shape'], cue)).all()
            assert (label[py0:py1, px0:px1] == MARKER).all()
            for window_patches in (1, 2, 4):
                if window_patches <= w // 32:
                    px = window_patches * 16
                    assert _window(y0, x0, px) != _window(py0, px0, px)
            seen[obj['shape']].add(obj['cls'])
            marked[y0:y1, x0:x1] = marked[py0:py1, px0:px1] = True
        assert (label[~marked] == BACKGROUND).all()
    for shape, classes in seen.items():
        assert classes == {object_class(shape, c) for c in range(NUM_CUES)}


def _samples(count: int = 200, task: str = 'partner'):
    return [context_seg_sample(0, 'train', i, task) for i in range(count)]


def test_corner_object_label_is_a_function_of_the_distant_cue():
    """Every object pixel's label is object_class(shape, cue), with the cue read back from the marker's pixels
    in a far corner block that no object enters; the same shape takes every class as the cue changes."""
    seen = {shape: set() for shape in range(len(SHAPES))}
    for image, label, meta in _samples(task='corner'):
        cue = read_corner_cue(image)
        assert cue == meta['cue']
        y0, x0, y1, x1 = meta['marker_box']
        assert (label[y0:y1, x0:x1] == MARKER).all()
        assert np.abs(image[y0:y1, x0:x1].astype(int).mean((0, 1)) - CUE_COLORS[cue]).max() < 20
        # the marker's corner block (one 2 x 2-patch window) holds no object pixel
        h, w = label.shape
        by = slice(0, 32) if meta['corner'].startswith('top') else slice(h - 32, h)
        bx = slice(0, 32) if meta['corner'].endswith('left') else slice(w - 32, w)
        assert set(np.unique(label[by, bx])) <= {BACKGROUND, MARKER}
        # outside that block: no marker; every object pixel carries its class from (shape, cue)
        outside = label.copy()
        outside[by, bx] = BACKGROUND
        assert not (outside == MARKER).any()
        for obj in meta['objects']:
            oy0, ox0, oy1, ox1 = obj['box']
            region = label[oy0:oy1, ox0:ox1]
            own = region[region >= 2]  # a later object may cover part of this one
            assert obj['cls'] == object_class(obj['shape'], cue)
            seen[obj['shape']].add(obj['cls'])
            # boxes sit on whole 16-pixel patches
            assert oy0 % 16 == 0 and ox0 % 16 == 0 and (oy1 - oy0) % 16 == 0 and (ox1 - ox0) % 16 == 0
            assert own.size > 0
        drawn = [o['cls'] for o in meta['objects']]
        assert set(np.unique(label)) <= {BACKGROUND, MARKER, *drawn}
    for shape, classes in seen.items():
        assert classes == {object_class(shape, c) for c in range(NUM_CUES)}


@pytest.mark.parametrize('task', ['partner', 'corner'])
def test_objects_look_the_same_whatever_the_cue(task):
    """Locally an object does not reveal the cue: its grey levels have the same range for every cue."""
    means = {c: [] for c in range(NUM_CUES)}
    for image, label, meta in _samples(task=task):
        for obj in meta['objects']:
            oy0, ox0, oy1, ox1 = obj['box']
            pixels = image[oy0:oy1, ox0:ox1][label[oy0:oy1, ox0:ox1] == obj['cls']].astype(float)
            if pixels.size:
                means[obj['cue'] if task == 'partner' else meta['cue']].append(pixels.mean())
                # grey: no channel stands out (the marker colours are saturated)
                assert np.ptp(pixels.mean(0)) < 15
    centres = [np.mean(v) for v in means.values()]
    assert all(len(v) > 30 for v in means.values())
    assert max(centres) - min(centres) < 10


def test_corner_distractors_are_background_and_do_not_hide_the_cue():
    for index in range(40):
        image, label, meta = context_seg_sample(0, 'train', index, 'corner', marker_size=16, distractors=(2, 3))
        assert len(meta['distractors']) >= 1
        assert read_corner_cue(image) == meta['cue']
        for y0, x0, y1, x1 in meta['distractors']:
            assert (label[y0:y1, x0:x1] == BACKGROUND).all()
            mean = image[y0:y1, x0:x1].astype(int).mean((0, 1))
            assert min(np.abs(mean - c).max() for c in DISTRACTOR_COLORS) < 20  # a distractor colour
            assert min(np.abs(mean - c).max() for c in CUE_COLORS) > 60  # never a cue colour
