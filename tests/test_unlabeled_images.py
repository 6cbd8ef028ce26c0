"""Unlabeled distillation images (configs/_base_/datasets/depth_unlabeled.py, issue #32 item 5): every image suffix
mmcv reads, in either case and in subfolders, is found; other files are not; the images load through the pipeline."""
from pathlib import Path

import cv2
import numpy as np
from mmengine.config import Config
from mmengine.registry import DefaultScope

import jetvit_mm.mm  # noqa: F401  (registrations)

REPO = Path(__file__).resolve().parents[1]
IMAGES = ['a.jpg', 'b.jpeg', 'c.png', 'd.bmp', 'e.tif', 'f.tiff', 'g.webp', 'sub/h.JPG', 'sub/deeper/i.PNG']


def test_every_image_suffix_is_a_distillation_image(tmp_path):
    root = tmp_path / 'unlabeled'
    rng = np.random.default_rng(0)
    for name in IMAGES:
        path = root / 'images' / name
        path.parent.mkdir(parents=True, exist_ok=True)
        assert cv2.imwrite(str(path), rng.integers(0, 255, (40, 60, 3), dtype=np.uint8))
    (root / 'images' / 'notes.txt').write_text('not an image')
    cfg = Config.fromfile(REPO / 'configs' / '_base_' / 'datasets' / 'depth_unlabeled.py')
    dataset_cfg = dict(cfg.train_dataloader.dataset, data_root=str(root),
                       pipeline=[dict(type='LoadImageFromFile')])
    with DefaultScope.overwrite_default_scope('mmseg'):
        from mmseg.registry import DATASETS
        dataset = DATASETS.build(dataset_cfg)
    found = sorted(Path(dataset.get_data_info(i)['img_path']).relative_to(root / 'images').as_posix()
                   for i in range(len(dataset)))
    assert found == sorted(IMAGES)
    assert all(dataset[i]['img'].shape == (40, 60, 3) for i in range(len(dataset)))
