"""The JetViT paper's zero-shot depth benchmarks (Table 4): DIODE, MPI Sintel and Cityscapes, read in their release
formats, at the original resolution, through the shipped configs and tools/test.py.

Every ground truth is also read here by an independent decoder (struct for Sintel's .dpt, OpenCV + json for
Cityscapes, plain numpy for DIODE), and the tool's AbsRel / delta1 are recomputed without mmengine.
"""
import json
import re
import struct
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from PIL import Image

from jetvit_mm.depth.formats import (
    cityscapes_disparity_to_depth,
    read_cityscapes_camera,
    read_diode_depth,
    read_sintel_dpt,
)
from jetvit_mm.models.depth_anything import JetViTDepthAnything, export_mmseg_checkpoint

from .conftest import REPO, run_tool
from .fixtures.datasets import CITYSCAPES_CAMERA, make_cityscapes_depth, make_diode, make_sintel_depth, write_sintel_dpt
from .test_depth import TINY, TINY_HEAD, infer_image_reference, write_original_checkpoint

BASELINE, FX = CITYSCAPES_CAMERA['extrinsic']['baseline'], CITYSCAPES_CAMERA['intrinsic']['fx']


# ------------------------------------------------------------------------------------------ independent decoders
def sintel_by_struct(path: Path) -> np.ndarray:
    raw = path.read_bytes()
    tag, width, height = struct.unpack('<fii', raw[:12])
    assert tag == 202021.25
    return np.array(struct.unpack(f'<{width * height}f', raw[12:]), np.float32).reshape(height, width)


def cityscapes_by_cv2(disparity: Path, camera: Path) -> np.ndarray:
    p = cv2.imread(str(disparity), cv2.IMREAD_UNCHANGED)
    assert p.dtype == np.uint16
    cam = json.loads(camera.read_text())
    depth = np.zeros(p.shape, np.float64)
    depth[p > 1] = cam['extrinsic']['baseline'] * cam['intrinsic']['fx'] * 256. / (p[p > 1].astype(np.float64) - 1)
    return depth


def diode_by_numpy(depth: Path, mask: Path) -> np.ndarray:
    return np.load(depth)[:, :, 0] * (np.load(mask) == 1)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    """Real layouts at the real aspect ratios (DIODE 3:4, Sintel 436:1024, Cityscapes 1:2), scaled down."""
    root = tmp_path_factory.mktemp('zero_shot')
    return dict(diode=make_diode(root / 'diode', scans_per_type=1, views_per_scan=2, size=(96, 128)),
                sintel=make_sintel_depth(root / 'sintel', frames=2, size=(44, 104)),
                cityscapes=make_cityscapes_depth(root / 'cityscapes', splits={'val': 2}, size=(128, 256)))


# ------------------------------------------------------------------------------------------ 1. the formats
def test_sintel_dpt_round_trip_and_bad_files(tmp_path):
    depth = np.random.default_rng(0).uniform(0.5, 80, size=(5, 7)).astype(np.float32)
    write_sintel_dpt(tmp_path / 'a.dpt', depth)
    assert (tmp_path / 'a.dpt').stat().st_size == 12 + 4 * 35
    assert np.array_equal(read_sintel_dpt(tmp_path / 'a.dpt'), depth)
    assert np.array_equal(sintel_by_struct(tmp_path / 'a.dpt'), depth)

    flow = struct.pack('<4sii', b'PIEH', 7, 5) + np.stack([depth, depth], -1).tobytes()  # .flo: same tag, 2 channels
    (tmp_path / 'frame.flo').write_bytes(flow)
    with pytest.raises(ValueError, match=r'frame\.flo: a 7x5 \.dpt file has 152 bytes, this one 292 \(two values per '
                                         r'pixel: an optical-flow \.flo file'):
        read_sintel_dpt(tmp_path / 'frame.flo')
    (tmp_path / 'image.dpt').write_bytes(b'\x89PNG\r\n\x1a\n' + bytes(40))
    with pytest.raises(ValueError, match=r'image\.dpt: not a Sintel \.dpt file \(tag .*, expected 202021\.25\)'):
        read_sintel_dpt(tmp_path / 'image.dpt')
    (tmp_path / 'cut.dpt').write_bytes((tmp_path / 'a.dpt').read_bytes()[:-4])
    with pytest.raises(ValueError, match=r'cut\.dpt: a 7x5 \.dpt file has 152 bytes, this one 148'):
        read_sintel_dpt(tmp_path / 'cut.dpt')


def test_cityscapes_disparity_to_depth_and_camera(tmp_path):
    raw = np.array([[0, 1, 2, 257]], np.uint16)  # none, zero disparity, 1/256 px, 1 px
    depth = cityscapes_disparity_to_depth(raw, baseline=0.2, fx=2000.)
    assert depth.dtype == np.float32
    assert depth.tolist()[0] == pytest.approx([0., 0., 0.2 * 2000. * 256, 0.2 * 2000.])
    with pytest.raises(ValueError, match='uint16 PNGs, got uint8'):
        cityscapes_disparity_to_depth(raw.astype(np.uint8), 0.2, 2000.)
    (tmp_path / 'c.json').write_text(json.dumps({'extrinsic': {'baseline': 0.2}, 'intrinsic': {}}))
    with pytest.raises(ValueError, match=r"c\.json: .* needs extrinsic\.baseline and intrinsic\.fx \(missing 'fx'\)"):
        read_cityscapes_camera(tmp_path / 'c.json')


def test_diode_mask_decides_validity(tmp_path):
    depth = np.full((3, 4, 1), 5., np.float32)
    mask = np.ones((3, 4), np.float32)
    mask[0, 0] = 0
    np.save(tmp_path / 'd.npy', depth)
    np.save(tmp_path / 'm.npy', mask)
    out = read_diode_depth(tmp_path / 'd.npy', tmp_path / 'm.npy')
    assert out.shape == (3, 4) and out[0, 0] == 0 and (out.reshape(-1)[1:] == 5).all()
    np.save(tmp_path / 'm.npy', mask[:2])
    with pytest.raises(ValueError, match=r'm\.npy: validity mask \(2, 4\) does not match the depth map \(3, 4\)'):
        read_diode_depth(tmp_path / 'd.npy', tmp_path / 'm.npy')


# ------------------------------------------------------------------------------------------ 2. datasets + loading
def test_datasets_pair_files_and_load_the_ground_truth(data):
    from mmengine.dataset import Compose

    import jetvit_mm.mm  # noqa: F401
    from jetvit_mm.mm import CityscapesDepthDataset, DIODEDepthDataset, LoadZeroShotDepth, SintelDepthDataset

    diode = DIODEDepthDataset(data_root=str(data['diode']))
    sintel = SintelDepthDataset(data_root=str(data['sintel']))
    cityscapes = CityscapesDepthDataset(data_root=str(data['cityscapes']))
    assert [len(diode), len(sintel), len(cityscapes)] == [4, 4, 2]
    assert [s['scene_type'] for s in diode] == ['indoors'] * 2 + ['outdoor'] * 2
    assert len(DIODEDepthDataset(data_root=str(data['diode']), scene_types='outdoor')) == 2
    assert {s['scene'] for s in sintel} == {'alley_1', 'bamboo_2'}
    assert all('/training/final/' in s['img_path'] for s in sintel)
    clean = SintelDepthDataset(data_root=str(data['sintel']), data_prefix=dict(img_path='training/clean'))
    assert all('/training/clean/' in s['img_path'] for s in clean) and len(clean) == 4

    load = Compose([dict(type='LoadImageFromFile'), LoadZeroShotDepth()])
    for dataset, reference in ((diode, lambda s: diode_by_numpy(Path(s['depth_map_path']),
                                                                Path(s['depth_mask_path']))),
                               (sintel, lambda s: sintel_by_struct(Path(s['depth_map_path']))),
                               (cityscapes, lambda s: cityscapes_by_cv2(Path(s['depth_map_path']),
                                                                        Path(s['camera_path'])))):
        for i in range(len(dataset)):
            sample = dataset.get_data_info(i)
            stem = Path(sample['img_path']).name.replace('_leftImg8bit', '').rsplit('.', 1)[0]
            assert Path(sample['depth_map_path']).name.startswith(stem)
            out = load(dict(sample))
            gt = out['gt_depth_map']
            assert gt.dtype == np.float32 and gt.shape == out['img'].shape[:2]
            assert 'gt_depth_map' in out['seg_fields']
            np.testing.assert_allclose(gt, reference(sample), rtol=1e-6)
            assert 0 < (gt == 0).mean() < 0.2 or dataset is sintel  # holes without ground truth (Sintel is dense)
    # the generators' metric ranges: DIODE outdoor ten times indoor, Cityscapes street scale
    city = load(dict(cityscapes.get_data_info(0)))['gt_depth_map']
    assert 7. < city[city > 0].min() and city[(city > 0) & (city < 100)].max() < 81.
    assert np.isclose(city.max(), 110., rtol=0.01)  # the far band beyond the configs' 80 m


def test_dataset_errors_name_the_problem(data, tmp_path):
    import shutil

    from jetvit_mm.mm import CityscapesDepthDataset, DIODEDepthDataset, LoadZeroShotDepth, SintelDepthDataset

    with pytest.raises(ValueError, match=r"unknown DIODE scene type\(s\) \['indoor'\]; valid: indoors, outdoor"):
        DIODEDepthDataset(data_root=str(data['diode']), scene_types=('indoor',))
    with pytest.raises(FileNotFoundError, match=r'DIODE split folder not found: .*/nowhere/val \(expected layout'):
        DIODEDepthDataset(data_root=str(tmp_path / 'nowhere'))
    with pytest.raises(ValueError, match=r"Sintel scene\(s\) \['cave_4'\] not in .*; available: alley_1, bamboo_2"):
        SintelDepthDataset(data_root=str(data['sintel']), scenes=('cave_4',))

    broken = shutil.copytree(data['cityscapes'], tmp_path / 'cityscapes')
    camera = next((broken / 'camera' / 'val').rglob('*_camera.json'))
    camera.unlink()
    with pytest.raises(FileNotFoundError, match=rf'ground truth of .*_leftImg8bit\.png not found: .*{camera.name}'):
        CityscapesDepthDataset(data_root=str(broken))
    with pytest.raises(KeyError, match=r"depth_format 'nyu' is not one LoadZeroShotDepth reads \(diode, sintel, "
                                       r"cityscapes\)"):
        LoadZeroShotDepth()(dict(img_path='x.jpg', depth_format='nyu'))


def test_depth_anything_resize_keeps_the_original_resolution():
    from jetvit_mm.mm import DepthAnythingResize

    for (h, w), expected in (((768, 1024), (770, 1022)), ((436, 1024), (448, 1022)), ((1024, 2048), (1036, 2044))):
        out = DepthAnythingResize(size=None)(dict(img=np.zeros((h, w, 3), np.uint8)))
        assert out['img'].shape[:2] == out['img_shape'] == expected
    assert DepthAnythingResize(size=518)(dict(img=np.zeros((768, 1024, 3), np.uint8)))['img_shape'] == (518, 686)
    with pytest.raises(ValueError, match=r'size must be a positive int or None \(original resolution\)'):
        DepthAnythingResize(size=0)


# ------------------------------------------------------------------------------------------ 3. shipped configs
CASES = {  # config -> (data key, depth range of the config, independent ground truth of a sample path)
    'diode': ((0.6, 350.), lambda img: diode_by_numpy(img.with_name(img.stem + '_depth.npy'),
                                                      img.with_name(img.stem + '_depth_mask.npy'))),
    'sintel': ((1e-3, 72.), lambda img: sintel_by_struct(
        img.parents[3] / 'training' / 'depth' / img.parent.name / f'{img.stem}.dpt')),
    'cityscapes': ((1e-3, 80.), lambda img: cityscapes_by_cv2(
        *(img.parents[3] / kind / 'val' / img.parent.name / img.name.replace('leftImg8bit.png', f'{kind}.{ext}')
          for kind, ext in (('disparity', 'png'), ('camera', 'json'))))),
}
IMAGES = {'diode': 'val/*/scene_*/scan_*/*.png', 'sintel': 'training/final/*/frame_*.png',
          'cityscapes': 'leftImg8bit/val/*/*_leftImg8bit.png'}


CONFIGS = REPO / 'configs' / 'depth'
# the shipped configs with the backbone and the head shrunk to the tiny checkpoint's widths
SHRINK = [*(f'model.backbone.{k}={v}' for k, v in (('embed_dim', 32), ('depth', 4), ('num_heads', 2))),
          'model.backbone.out_indices=(0,1,2,3)', 'model.decode_head.in_channels=32',
          f'model.decode_head.features={TINY_HEAD["features"]}',
          f'model.decode_head.out_channels={list(TINY_HEAD["out_channels"])}']


def single_process(split: str) -> list:
    return [f'{split}_dataloader.num_workers=0', f'{split}_dataloader.persistent_workers=False']


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp('zero_shot_ckpt')
    write_original_checkpoint(root / 'depth_anything_v2_tiny.pth', depth=4, taps=(0, 1, 2, 3), seed=2)
    return export_mmseg_checkpoint(root / 'depth_anything_v2_tiny.pth', root / 'tiny_mmseg.pth'), \
        root / 'depth_anything_v2_tiny.pth'


def reference_metrics(original: Path, root: Path, name: str) -> dict:
    """DepthAnythingV2's ``infer_image(image, input_size=min(h, w))`` (cv2 bicubic on RGB/255, ImageNet norm,
    bilinear align_corners back) and :func:`affine_invariant_errors` on the independently decoded ground truth."""
    from jetvit_mm.depth import affine_invariant_errors

    (min_depth, max_depth), ground_truth = CASES[name]
    model = JetViTDepthAnything.from_checkpoint(original, arch=None, **TINY, **TINY_HEAD).eval()
    errors = []
    for image_path in sorted(root.glob(IMAGES[name])):
        with Image.open(image_path) as image:
            short_side = min(image.size)
        disparity = infer_image_reference(model, image_path, size=short_side)
        gt = torch.from_numpy(np.asarray(ground_truth(image_path), np.float32))
        errors.append(affine_invariant_errors(disparity, gt, min_depth=min_depth, max_depth=max_depth))
    assert len(errors) >= 2
    return dict(abs_rel=float(np.mean([e[0] for e in errors])), delta1=float(np.mean([e[1] for e in errors])))


@pytest.mark.parametrize('name', list(CASES))
@pytest.mark.integration
def test_shipped_zero_shot_config_through_tools_test(name, data, checkpoint, tmp_path):
    """configs/depth/depthanything_large_eval_<name>.py with the backbone and head shrunk (everything else as
    shipped): tools/test.py's AbsRel / delta1 equal the independent recomputation."""
    mmseg_ckpt, original = checkpoint
    out = tmp_path / 'metrics.json'
    config = CONFIGS / f'depthanything_large_eval_{name}.py'
    proc = run_tool('test.py', config, mmseg_ckpt, '--work-dir', tmp_path, '--out', out, '--cfg-options', *SHRINK,
                    *single_process('test'), f'test_dataloader.dataset.data_root={data[name]}')
    metrics = json.loads(out.read_text())
    assert set(metrics) == {'abs_rel', 'delta1'}
    evaluator = Config.fromfile(config).test_evaluator
    assert (evaluator.min_depth, evaluator.max_depth) == CASES[name][0]  # the protocol the reference uses
    assert 0 < metrics['abs_rel'] < np.inf and 0 <= metrics['delta1'] <= 1
    assert metrics == pytest.approx(reference_metrics(original, data[name], name), abs=1e-5)
    assert not re.search(r'NaN or infinite|no valid depth', proc.stdout + proc.stderr)


@pytest.mark.integration
def test_search_scores_archs_by_a_zero_shot_set(data, checkpoint, tmp_path):
    """tools/search.py takes a zero-shot config as its evaluation: Step 1 on DIODE AbsRel (lower is better, as the
    metric declares) after a supernet distillation, and the best arch is the lowest score."""
    from .fixtures.datasets import make_depth

    mmseg_ckpt, original = checkpoint
    nyu = make_depth(tmp_path / 'nyu', splits={'train': 4}, size=(48, 64), seed=0)
    run_tool('train.py', REPO / 'tests' / 'configs' / 'depth_distill_tiny.py', '--work-dir', tmp_path / 'distill',
             '--cfg-options', f'train_dataloader.dataset.data_root={nyu}', f'model.teacher.checkpoint={original}')
    run_tool('search.py', CONFIGS / 'depthanything_large_eval_diode.py', tmp_path / 'distill' / 'iter_4.pth',
             '--stage', '1', '--metric', 'abs_rel', '--head-checkpoint', mmseg_ckpt, '--beam-width', '2',
             '--min-gain', '0.0', '--work-dir', tmp_path / 'search', '--device', 'cpu', '--cfg-options',
             *SHRINK, 'model.backbone.mixers.W.window_size=2', *single_process('val'),
             f'val_dataloader.dataset.data_root={data["diode"]}')
    summary = json.loads((tmp_path / 'search' / 'search.json').read_text())
    scores = {r['arch']: r['score'] for r in summary['archs']}
    assert summary['higher_is_better'] is False and len(scores) >= 4
    assert all(0 < v < np.inf for v in scores.values()) and len(set(scores.values())) > 1
    assert summary['best']['1']['score'] == min(scores.values())
    assert scores[summary['best']['1']['arch']] == min(scores.values())
