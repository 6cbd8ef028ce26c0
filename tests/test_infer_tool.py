"""tools/infer.py on real image files: segmentation (palette PNG + overlay) and depth (colour map, raw .npy, 16-bit
PNG) at odd image sizes, batched, from files, a folder and a glob; clear errors for bad inputs."""
import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

from jetvit_mm.models.mixers import default_mixers

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


@pytest.mark.integration
def test_segmentation_writes_palette_png_and_overlay(images, tmp_path):
    out = tmp_path / 'seg'
    run_tool('infer.py', SEG, 'none', images, '--out-dir', out, '--batch', '2')
    for i, (h, w) in enumerate([(50, 77), (64, 128), (41, 90)]):
        seg = Image.open(out / f'img{i}_seg.png')
        assert seg.mode == 'P' and seg.size == (w, h)
        assert np.asarray(seg).max() < 19
        assert cv2.imread(str(out / f'img{i}_overlay.png')).shape == (h, w, 3)


@pytest.mark.integration
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


@pytest.mark.integration
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
    other = JetViT(model_name='dinov3_vits16', arch='LW', embed_dim=32, depth=2, num_heads=2,
                   mixers=default_mixers(W=dict(window_size=4)))
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in other.state_dict().items()}}, wrong)
    proc = run_tool('infer.py', SEG, wrong, images / 'img0.png', '--out-dir', tmp_path / 'o3', check=False)
    assert proc.returncode != 0 and 'wrong.pth' in proc.stderr and 'arch' in proc.stderr, proc.stderr[-2000:]


# ---------------------------------------------------------------------------------------------- --compare, --pca
def _downstream_checkpoint(config, arch, seed: int, path):
    """A downstream checkpoint of ``config``'s model with backbone ``arch`` (None: the config's), random weights."""
    from mmengine.config import Config
    from mmseg.apis import init_model

    import jetvit_mm.mm  # noqa: F401

    cfg = Config.fromfile(config)
    if arch is not None:
        cfg.model.backbone.arch = arch
    torch.manual_seed(seed)
    torch.save({'state_dict': init_model(cfg, None, device='cpu').state_dict(), 'meta': {}}, path)
    return path


@pytest.fixture(scope='module')
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp('infer_checkpoints')
    return dict(seg_teacher=_downstream_checkpoint(SEG, 'FFFF', 0, root / 'seg_teacher.pth'),
                seg_hybrid=_downstream_checkpoint(SEG, None, 1, root / 'seg_hybrid.pth'),  # LWLF
                depth_teacher=_downstream_checkpoint(DEPTH, 'FFFF', 0, root / 'depth_teacher.pth'),
                depth_hybrid=_downstream_checkpoint(DEPTH, None, 1, root / 'depth_hybrid.pth'))


SIZES = [(50, 77), (64, 128), (41, 90)]


def _picture(path) -> np.ndarray:
    from jetvit_mm.visual.panels import HEADER_PX

    image = cv2.imread(str(path))
    assert image is not None, path
    return image[HEADER_PX:]  # below the text band


def _teacher_classes(checkpoint, image_path) -> np.ndarray:
    """The all-F teacher's class map, computed here independently of the tool."""
    from mmengine.config import Config
    from mmseg.apis import inference_model

    from jetvit_mm.mm.apis.infer import load_model

    cfg = Config.fromfile(SEG)
    cfg.model.backbone.arch = 'FFFF'
    model = load_model(cfg, str(checkpoint))
    return inference_model(model, cv2.imread(str(image_path))).pred_sem_seg.data[0].numpy()


@pytest.mark.integration
def test_compare_segmentation_panels_figures_and_pca(images, checkpoints, tmp_path):
    """The teacher is built with the arch its checkpoint names (FFFF, the config says LWLF): the share of differing
    pixels is that of an independent teacher prediction against the hybrid's, latency measured for both; the
    hybrid compared with itself differs nowhere, its features' cosine is 1 and the two PCA halves are equal."""
    out = tmp_path / 'cmp'
    run_tool('infer.py', SEG, checkpoints['seg_hybrid'], images, '--out-dir', out, '--compare',
             checkpoints['seg_teacher'], '--pca')
    report = json.loads((out / 'compare.json').read_text())
    assert 'time_interleaved' in report['latency']['how'] and report['latency']['repeat'] == 3
    assert [r['size'] for r in report['images']] == [list(s) for s in SIZES]
    for i, ((h, w), record) in enumerate(zip(SIZES, report['images'])):
        assert _picture(out / f'img{i}_compare.png').shape == (h, 4 * w, 3)
        assert _picture(out / f'img{i}_pca.png').shape == (h, 2 * w, 3)
        assert all(record['latency_ms'][m]['median_ms'] > 0 for m in ('teacher', 'hybrid'))
        hybrid = np.asarray(Image.open(out / f'img{i}_seg.png'))
        teacher = _teacher_classes(checkpoints['seg_teacher'], images / f'img{i}.png')
        assert record['class_differs_share'] == pytest.approx(float((teacher != hybrid).mean()), abs=1e-12)
        assert 0 < record['class_differs_share'] <= 1 and record['feature_cosine_mean'] < 0.99
    same = tmp_path / 'same'
    run_tool('infer.py', SEG, checkpoints['seg_hybrid'], images / 'img0.png', '--out-dir', same, '--compare',
             checkpoints['seg_hybrid'], '--pca')
    record = json.loads((same / 'compare.json').read_text())['images'][0]
    assert record['class_differs_share'] == 0 and record['feature_cosine_mean'] == pytest.approx(1, abs=1e-6)
    pca = _picture(same / 'img0_pca.png')
    assert np.array_equal(pca[:, :77], pca[:, 77:]) and pca.std() > 0


@pytest.mark.integration
def test_compare_depth_figures_match_the_two_predictions(images, checkpoints, tmp_path):
    """Depth: the mean / max / relative |teacher - hybrid| of compare.json are those of the two models' raw
    disparities (each written by the plain tool); a model compared with itself differs by 0."""
    out, alone = tmp_path / 'cmp', tmp_path / 'teacher'
    run_tool('infer.py', DEPTH, checkpoints['depth_hybrid'], images, '--out-dir', out, '--compare',
             checkpoints['depth_teacher'], '--repeat', '2')
    run_tool('infer.py', DEPTH, checkpoints['depth_teacher'], images, '--out-dir', alone)
    report = json.loads((out / 'compare.json').read_text())
    assert report['latency']['repeat'] == 2
    for i, ((h, w), record) in enumerate(zip(SIZES, report['images'])):
        assert _picture(out / f'img{i}_compare.png').shape == (h, 4 * w, 3)
        teacher = np.load(alone / f'img{i}_disparity.npy').astype(np.float64)
        hybrid = np.load(out / f'img{i}_disparity.npy').astype(np.float64)
        diff = np.abs(teacher - hybrid)
        assert diff.max() > 0
        assert record['disparity_abs_diff_mean'] == pytest.approx(diff.mean(), rel=1e-5)
        assert record['disparity_abs_diff_max'] == pytest.approx(diff.max(), rel=1e-5)
        nonzero = teacher != 0
        assert record['disparity_rel_diff_mean'] == pytest.approx((diff[nonzero] / np.abs(teacher[nonzero])).mean(),
                                                                  rel=1e-5)
    same = tmp_path / 'same'
    run_tool('infer.py', DEPTH, checkpoints['depth_teacher'], images / 'img1.png', '--out-dir', same, '--compare',
             checkpoints['depth_teacher'], '--pca')
    record = json.loads((same / 'compare.json').read_text())['images'][0]
    assert record['disparity_abs_diff_max'] == 0 and record['feature_cosine_mean'] == pytest.approx(1, abs=1e-6)


@pytest.mark.integration
def test_pca_alone_shows_the_hybrid(images, checkpoints, tmp_path):
    out = tmp_path / 'pca'
    run_tool('infer.py', SEG, checkpoints['seg_hybrid'], images / 'img1.png', '--out-dir', out, '--pca')
    pca = _picture(out / 'img1_pca.png')
    assert pca.shape == (64, 128, 3) and len(np.unique(pca.reshape(-1, 3), axis=0)) > 8
    assert (out / 'img1_seg.png').is_file() and not (out / 'compare.json').exists()


# ---------------------------------------------------------------------------------------------- no config given
@pytest.fixture(scope='module')
def runner_checkpoint(tiny_cityscapes, tmp_path_factory):
    work = tmp_path_factory.mktemp('infer_runner')
    run_tool('train.py', SEG, '--work-dir', work, '--cfg-options',
             *[f'{s}_dataloader.dataset.data_root={tiny_cityscapes}' for s in ('train', 'val', 'test')],
             'train_cfg.max_iters=2', 'train_cfg.val_interval=2', 'default_hooks.checkpoint.interval=2')
    return work / 'iter_2.pth'


def _same_outputs(a, b, names) -> None:
    for name in names:
        assert np.array_equal(np.asarray(Image.open(a / name)), np.asarray(Image.open(b / name))), name


@pytest.mark.integration
def test_runner_checkpoint_runs_without_its_config(images, runner_checkpoint, tmp_path):
    run_tool('infer.py', SEG, runner_checkpoint, images, '--out-dir', tmp_path / 'with')
    run_tool('infer.py', runner_checkpoint, images, '--out-dir', tmp_path / 'without')
    _same_outputs(tmp_path / 'with', tmp_path / 'without', [f'img{i}_{k}.png' for i in range(3)
                                                            for k in ('seg', 'overlay')])


@pytest.mark.integration
def test_exported_hybrid_with_head_carries_its_config(images, runner_checkpoint, tmp_path):
    from mmengine.config import Config

    from jetvit_mm.mm.apis.export import export_hybrid
    from jetvit_mm.mm.search.scoring import backbone_args
    from jetvit_mm.models.checkpoint import read
    from jetvit_mm.models.checkpoint.config_text import literal_assignments
    from jetvit_mm.models.supernet import JetViTSupernet

    cfg = Config.fromfile(SEG)
    torch.manual_seed(3)
    supernet = JetViTSupernet(search_space=['LW', 'LW', 'LW', 'F'], **backbone_args(cfg))
    paths = export_hybrid(supernet, 'LWLF', tmp_path / 'export', str(runner_checkpoint), downstream_cfg=cfg)
    saved = literal_assignments(read(str(paths['with_head'])).raw['meta']['cfg'])
    assert saved['model']['backbone']['arch'] == 'LWLF' and saved['model']['backbone']['checkpoint'] is None
    run_tool('infer.py', SEG, paths['with_head'], images, '--out-dir', tmp_path / 'with')
    run_tool('infer.py', paths['with_head'], images, '--out-dir', tmp_path / 'without')
    _same_outputs(tmp_path / 'with', tmp_path / 'without', [f'img{i}_seg.png' for i in range(3)])


@pytest.mark.integration
def test_config_text_with_code_is_never_run(images, runner_checkpoint, tmp_path):
    """Code in a checkpoint's config text never runs: around a literal model it is left out (the model runs), as
    the model's value the checkpoint counts as holding no config."""
    marker = tmp_path / 'payload_ran'
    raw = torch.load(runner_checkpoint, map_location='cpu', weights_only=False)  # our own file, written above
    payload = f"import os\nos.system('touch {marker}')\n"
    raw['meta']['cfg'] = payload + raw['meta']['cfg'] + f"x = __import__('os').system('touch {marker}')\n"
    torch.save(raw, tmp_path / 'around.pth')
    run_tool('infer.py', tmp_path / 'around.pth', images / 'img0.png', '--out-dir', tmp_path / 'o1')
    assert (tmp_path / 'o1' / 'img0_seg.png').is_file()
    raw['meta']['cfg'] = payload + f"model = __import__('os').system('touch {marker}')\n"
    torch.save(raw, tmp_path / 'as_model.pth')
    proc = run_tool('infer.py', tmp_path / 'as_model.pth', images / 'img0.png', '--out-dir', tmp_path / 'o2',
                    check=False)
    assert proc.returncode != 0 and 'without a literal `model = dict(...)`' in proc.stderr, proc.stderr[-2000:]
    assert 'CONFIG CHECKPOINT IMAGES' in proc.stderr
    assert not marker.exists(), 'the config text\'s code ran'


@pytest.mark.integration
def test_compare_and_config_less_bad_inputs_are_named(images, checkpoints, tmp_path):
    from jetvit_mm.models import JetViT

    wrong = tmp_path / 'wrong_teacher.pth'
    other = JetViT(model_name='dinov3_vits16', arch='FF', embed_dim=32, depth=2, num_heads=2,
                   mixers=default_mixers(W=dict(window_size=4)))
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in other.state_dict().items()}}, wrong)
    proc = run_tool('infer.py', SEG, checkpoints['seg_hybrid'], images / 'img0.png', '--out-dir', tmp_path / 'o1',
                    '--compare', wrong, check=False)
    assert proc.returncode != 0 and 'wrong_teacher.pth does not fit the model of' in proc.stderr, proc.stderr[-2000:]
    proc = run_tool('infer.py', checkpoints['seg_hybrid'], images / 'img0.png', '--out-dir', tmp_path / 'o2',
                    check=False)
    assert proc.returncode != 0 and 'seg_hybrid.pth holds no config text' in proc.stderr, proc.stderr[-2000:]
    assert 'tools/infer.py CONFIG CHECKPOINT IMAGES' in proc.stderr


# ------------------------------------------------------------------------------------ output names, overwriting
def _image(path, h: int, w: int, seed: int = 0):
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8))
    return path


def test_output_names_never_collide():
    """An input's outputs go under its path below the inputs' common folder; same stems keep their suffix."""
    from pathlib import Path

    from jetvit_mm.mm.apis.infer import output_stems

    inputs = [Path('/d/a/x.png'), Path('/d/b/x.png'), Path('/d/a/y.png'), Path('/d/a/y.jpg'), Path('/d/a/y_png.png')]
    stems = [s.as_posix() for s in output_stems(inputs, Path('out'))]
    assert stems == ['out/a/x', 'out/b/x', 'out/a/y_png', 'out/a/y_jpg', 'out/a/y_png_2']
    assert output_stems([Path('/d/a/x.png'), Path('/d/a/z.png')], Path('out')) == [Path('out/x'), Path('out/z')]


@pytest.mark.integration
def test_same_file_name_in_two_folders_gets_its_own_outputs(tmp_path):
    """Two inputs named x.png in two folders: each its own files (a/x_*, b/x_*), of its own image's size, and the
    count the tool reports is that of the files there."""
    sizes = {'a': (40, 60), 'b': (50, 30)}
    inputs = [_image(tmp_path / 'in' / name / 'x.png', h, w, seed) for seed, (name, (h, w)) in enumerate(sizes.items())]
    out = tmp_path / 'out'
    proc = run_tool('infer.py', SEG, 'none', *inputs, '--out-dir', out)
    for name, (h, w) in sizes.items():
        assert Image.open(out / name / 'x_seg.png').size == (w, h)
        assert cv2.imread(str(out / name / 'x_overlay.png')).shape == (h, w, 3)
    assert 'wrote 4 files for 2 images' in proc.stdout and len([p for p in out.rglob('*') if p.is_file()]) == 4


@pytest.mark.integration
def test_a_file_the_run_did_not_write_is_refused_unless_overwrite(tmp_path):
    """--out-dir the images' folder: the user's own a_seg.png is refused by name before any work (nothing written),
    replaced with --overwrite; an input image of the run is never replaced, --overwrite or not."""
    folder = tmp_path / 'images'
    image = _image(folder / 'a.png', 40, 60)
    mine = folder / 'a_seg.png'
    mine.write_bytes(b'my own file')
    proc = run_tool('infer.py', SEG, 'none', image, '--out-dir', folder, check=False)
    assert proc.returncode != 0 and str(mine) in proc.stderr and '--overwrite' in proc.stderr, proc.stderr[-2000:]
    assert mine.read_bytes() == b'my own file' and sorted(p.name for p in folder.iterdir()) == ['a.png', 'a_seg.png']
    run_tool('infer.py', SEG, 'none', image, '--out-dir', folder, '--overwrite')
    assert Image.open(mine).size == (60, 40) and (folder / 'a_overlay.png').is_file()
    proc = run_tool('infer.py', SEG, 'none', folder, '--out-dir', folder, '--overwrite', check=False)
    assert proc.returncode != 0 and f'{mine} would replace an input image' in proc.stderr, proc.stderr[-2000:]


@pytest.mark.integration
def test_compare_and_pca_outputs_never_collide_or_overwrite(checkpoints, tmp_path):
    """--compare / --pca name their pictures as the predictions (a/x_compare.png, b/x_pca.png, ...), and a
    compare.json the run did not write is refused by name, left as it was."""
    sizes = {'a': (40, 60), 'b': (50, 30)}
    inputs = [_image(tmp_path / 'in' / name / 'x.png', h, w, seed) for seed, (name, (h, w)) in enumerate(sizes.items())]
    out = tmp_path / 'out'
    options = ('--compare', checkpoints['seg_teacher'], '--pca', '--warmup', '0', '--repeat', '1')
    run_tool('infer.py', SEG, checkpoints['seg_hybrid'], *inputs, '--out-dir', out, *options)
    for name, (h, w) in sizes.items():
        assert _picture(out / name / 'x_compare.png').shape == (h, 4 * w, 3)
        assert _picture(out / name / 'x_pca.png').shape == (h, 2 * w, 3)
        assert Image.open(out / name / 'x_seg.png').size == (w, h)
    report = json.loads((out / 'compare.json').read_text())
    assert [r['size'] for r in report['images']] == [list(s) for s in sizes.values()]
    other = tmp_path / 'other'
    other.mkdir()
    (other / 'compare.json').write_text('{"mine": 1}')
    proc = run_tool('infer.py', SEG, checkpoints['seg_hybrid'], *inputs, '--out-dir', other, *options, check=False)
    assert proc.returncode != 0 and str(other / 'compare.json') in proc.stderr, proc.stderr[-2000:]
    assert (other / 'compare.json').read_text() == '{"mine": 1}' and [p.name for p in other.iterdir()] == [
        'compare.json']


@pytest.mark.integration
def test_depth_from_an_official_depth_anything_v2_file_in_two_lines(images, tmp_path):
    """An official DepthAnythingV2 checkpoint (pretrained.* + depth_head.*) and a folder of images give the depth maps
    in one call (the config names the model size), the same as through tools/convert_depth_anything.py."""
    from .test_depth import write_original_checkpoint

    official = tmp_path / 'depth_anything_v2_vits_tiny.pth'
    write_original_checkpoint(official, depth=4, taps=(0, 1, 2, 3))
    run_tool('infer.py', DEPTH, official, images, '--out-dir', tmp_path / 'direct')
    run_tool('convert_depth_anything.py', official, tmp_path / 'converted.pth')
    run_tool('infer.py', DEPTH, tmp_path / 'converted.pth', images, '--out-dir', tmp_path / 'converted')
    for name in ('img0', 'img1'):
        direct = np.load(tmp_path / 'direct' / f'{name}_disparity.npy')
        assert direct.std() > 0 and np.array_equal(direct, np.load(tmp_path / 'converted' / f'{name}_disparity.npy'))
        png16 = cv2.imread(str(tmp_path / 'direct' / f'{name}_disparity16.png'), cv2.IMREAD_UNCHANGED)
        assert png16.dtype == np.uint16 and (tmp_path / 'direct' / f'{name}_depth.png').is_file()


def test_infer_reads_its_checkpoint_once_and_the_core_never_calls_up_into_the_adapter(tmp_path, monkeypatch):
    """tools/infer.py with a checkpoint that carries its config: the file is opened once (its config, its DepthAnything
    layout, the fit check and the weights all come from that one checked read), and no function of
    ``jetvit_mm/models`` calls one of ``jetvit_mm/mm`` on the way (issue 40)."""
    import builtins
    import io
    import sys

    from mmengine.config import Config
    from mmseg.apis import init_model

    import jetvit_mm.mm  # noqa: F401
    from jetvit_mm.models.checkpoint import save

    from .test_bad_input import load_tool

    cfg = Config.fromfile(str(SEG))
    torch.manual_seed(0)
    state = init_model(cfg, None, device='cpu').state_dict()
    checkpoint = save({'state_dict': state, 'meta': {'cfg': cfg.pretty_text}}, tmp_path / 'probe.pth')
    image = tmp_path / 'img.png'
    cv2.imwrite(str(image), np.zeros((32, 48, 3), np.uint8))
    target, opened, upward = checkpoint.resolve(), [], set()

    def counted(real, what):
        def call(file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)) and Path(file).resolve() == target:
                opened.append(what)
            return real(file, *args, **kwargs)
        return call

    monkeypatch.setattr(builtins, 'open', counted(builtins.open, 'open'))
    monkeypatch.setattr(io, 'open', counted(io.open, 'io.open'))
    monkeypatch.setattr(torch, 'load', counted(torch.load, 'torch.load'))
    monkeypatch.setattr(torch.UntypedStorage, 'from_file', counted(torch.UntypedStorage.from_file, 'mmap'))

    adapter, core = f'{os.sep}jetvit_mm{os.sep}mm{os.sep}', f'{os.sep}jetvit_mm{os.sep}models{os.sep}'

    def profile(frame, event, arg):
        caller = frame.f_back
        if event == 'call' and caller is not None and adapter in frame.f_code.co_filename \
                and core in caller.f_code.co_filename:
            upward.add(f'{caller.f_code.co_filename}:{caller.f_code.co_name} -> {frame.f_code.co_name}')

    sys.setprofile(profile)
    try:
        load_tool('infer').main([str(checkpoint), str(image), '--out-dir', str(tmp_path / 'out')])
    finally:
        sys.setprofile(None)
    assert opened == ['open'], opened
    assert not upward, sorted(upward)
    assert (tmp_path / 'out' / 'img_seg.png').exists()
