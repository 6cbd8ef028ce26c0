"""tools/infer.py on real image files: segmentation (palette PNG + overlay) and depth (colour map, raw .npy, 16-bit
PNG) at odd image sizes, batched, from files, a folder and a glob; clear errors for bad inputs."""
import cv2
import numpy as np
import pytest
import torch
from PIL import Image

from .conftest import REPO, run_tool

SEG = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'
DEPTH = REPO / 'tests' / 'configs' / 'depth_eval_tiny_nyu.py'


@pytest.fixture()
def images(tmp_path):
    folder = tmp_path / 'images'
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate([(50, 77), (64, 128), (41, 90)]):  # not multiples of the patch
        cv2.imwrite(str(folder / f'img{i}.png'), rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
    return folder


def test_segmentation_writes_palette_png_and_overlay(images, tmp_path):
    out = tmp_path / 'seg'
    run_tool('infer.py', SEG, 'none', images, '--out-dir', out, '--batch', '2')
    for i, (h, w) in enumerate([(50, 77), (64, 128), (41, 90)]):
        seg = Image.open(out / f'img{i}_seg.png')
        assert seg.mode == 'P' and seg.size == (w, h)
        assert np.asarray(seg).max() < 19
        assert cv2.imread(str(out / f'img{i}_overlay.png')).shape == (h, w, 3)


def test_depth_writes_colour_map_raw_and_16_bit_disparity(images, tmp_path):
    out = tmp_path / 'depth'
    run_tool('infer.py', DEPTH, 'none', str(images / 'img*.png'), '--out-dir', out, '--batch', '3')
    for i, (h, w) in enumerate([(50, 77), (64, 128), (41, 90)]):
        raw = np.load(out / f'img{i}_disparity.npy')
        assert raw.shape == (h, w) and raw.dtype == np.float32 and np.isfinite(raw).all()
        png16 = cv2.imread(str(out / f'img{i}_disparity16.png'), cv2.IMREAD_UNCHANGED)
        assert png16.dtype == np.uint16 and png16.shape == (h, w)
        scaled = (raw - raw.min()) / max(float(raw.max() - raw.min()), 1e-12)
        assert np.abs(png16 / 65535. - scaled).max() <= 1 / 65535.
        assert cv2.imread(str(out / f'img{i}_depth.png')).shape == (h, w, 3)


def test_bad_inputs_are_named(images, tmp_path):
    empty = tmp_path / 'empty'
    empty.mkdir()
    proc = run_tool('infer.py', SEG, 'none', empty, '--out-dir', tmp_path / 'o1', check=False)
    assert proc.returncode != 0 and 'holds no images' in proc.stderr
    broken = images / 'broken.png'
    broken.write_bytes(b'not an image')
    proc = run_tool('infer.py', SEG, 'none', broken, '--out-dir', tmp_path / 'o2', check=False)
    assert proc.returncode != 0 and f'cannot read {broken}' in proc.stderr
    from jetvit_mm.models import JetViT

    wrong = tmp_path / 'wrong.pth'
    other = JetViT(model_name='dinov3_vits16', arch='LW', embed_dim=32, depth=2, num_heads=2, window_size=4)
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in other.state_dict().items()}}, wrong)
    proc = run_tool('infer.py', SEG, wrong, images / 'img0.png', '--out-dir', tmp_path / 'o3', check=False)
    assert proc.returncode != 0 and 'wrong.pth' in proc.stderr and 'arch' in proc.stderr, proc.stderr[-2000:]
