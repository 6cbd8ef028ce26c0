"""JetViT-DepthAnything: the DPT head against an independent DepthAnythingV2, the relative-depth metrics, DA-2K,
and the depth path through tools/train.py, tools/search.py and tools/test.py on generated data.

The independent reference is Hugging Face's ``DepthAnythingForDepthEstimation`` (a separate implementation of
DepthAnythingV2), randomly initialised and saved with the *original* key names by an inverse mapping written here.
Differences between it and the original code, none of which matters at the native 518x518 grid used below:

- position embeddings of other grids: HF interpolates to ``size=`` without the original's ``+0.1`` scale-factor
  offset (the original: ``scale_factor=((h + 0.1) / 37, (w + 0.1) / 37)``); at 37x37 neither interpolates;
- HF's fusion layer resizes the skip map when shapes differ (bilinear, align_corners=False); in the original the
  previous block is resized with ``size=`` to the skip map, so the shapes always agree and this never runs;
- HF's head multiplies the final ReLU by ``max_depth`` (1 for relative depth); the original applies ReLU twice
  (end of ``output_conv2`` and in ``forward``), which is the same function;
- outside the model: HF's image processor resizes with ``keep_aspect_ratio`` "as little as possible" (no 518 lower
  bound, PIL bicubic) and its ``post_process_depth_estimation`` resizes back bicubic/align_corners=False; the
  original (and this project) resizes so the short side is >= 518 (cv2 bicubic) and back bilinear/align_corners=True.
"""
import json
import math
import re
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from jetvit_mm.models.arch import SPEC_KEY, ArchSpec
from jetvit_mm.models.depth_anything import (
    JetViTDepthAnything,
    depth_anything_input_size,
    depth_state,
    export_mmseg_checkpoint,
)
from jetvit_mm.models.heads import DPT_PRESETS, DPTHead
from jetvit_mm.models.mixers import default_mixers

from .conftest import REPO, run_tool

TINY = dict(model_name='dinov2_vits14', embed_dim=32, depth=4, num_heads=2, out_indices=(0, 1, 2, 3))
TINY_HEAD = dict(features=16, out_channels=(8, 16, 32, 32))
CONFIGS = REPO / 'tests' / 'configs'


# ------------------------------------------------------------------------------------------ the reference model
def hf_depth_anything(depth: int, taps, seed: int = 0):
    """A random Hugging Face DepthAnything (DINOv2 backbone, patch 14, 37x37 position grid) with TINY_HEAD widths."""
    from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config

    torch.manual_seed(seed)
    backbone = Dinov2Config(image_size=518, patch_size=14, hidden_size=32, num_hidden_layers=depth,
                            num_attention_heads=2, out_indices=[t + 1 for t in taps], apply_layernorm=True,
                            reshape_hidden_states=False)
    config = DepthAnythingConfig(backbone_config=backbone, reassemble_hidden_size=32,
                                 neck_hidden_sizes=list(TINY_HEAD['out_channels']),
                                 fusion_hidden_size=TINY_HEAD['features'], head_hidden_size=32)
    model = DepthAnythingForDepthEstimation(config).eval()
    with torch.no_grad():  # every weight non-trivial (HF initialises biases to 0 and LayerScale to 1)
        for name, p in model.named_parameters():
            p.add_(torch.randn_like(p) * (0.3 if 'lambda1' in name else 0.05))
        model.head.conv3.bias.fill_(0.5)  # keep most of the final ReLU's input positive
    return model


def hf_to_original(state: dict) -> dict:
    """Hugging Face DepthAnything names -> DepthAnythingV2's (``pretrained.*`` DINOv2 + ``depth_head.*``)."""
    out, qkv = {}, {}
    rules = [
        (r'backbone\.embeddings\.cls_token', 'pretrained.cls_token'),
        (r'backbone\.embeddings\.mask_token', 'pretrained.mask_token'),
        (r'backbone\.embeddings\.position_embeddings', 'pretrained.pos_embed'),
        (r'backbone\.embeddings\.patch_embeddings\.projection\.(\w+)', r'pretrained.patch_embed.proj.\1'),
        (r'backbone\.encoder\.layer\.(\d+)\.(norm[12])\.(\w+)', r'pretrained.blocks.\1.\2.\3'),
        (r'backbone\.encoder\.layer\.(\d+)\.attention\.o_proj\.(\w+)', r'pretrained.blocks.\1.attn.proj.\2'),
        (r'backbone\.encoder\.layer\.(\d+)\.layer_scale([12])\.lambda1', r'pretrained.blocks.\1.ls\2.gamma'),
        (r'backbone\.encoder\.layer\.(\d+)\.mlp\.(fc[12])\.(\w+)', r'pretrained.blocks.\1.mlp.\2.\3'),
        (r'backbone\.layernorm\.(\w+)', r'pretrained.norm.\1'),
        (r'neck\.reassemble_stage\.layers\.(\d)\.projection\.(\w+)', r'depth_head.projects.\1.\2'),
        (r'neck\.reassemble_stage\.layers\.(\d)\.resize\.(\w+)', r'depth_head.resize_layers.\1.\2'),
        (r'head\.conv1\.(\w+)', r'depth_head.scratch.output_conv1.\1'),
        (r'head\.conv2\.(\w+)', r'depth_head.scratch.output_conv2.0.\1'),
        (r'head\.conv3\.(\w+)', r'depth_head.scratch.output_conv2.2.\1'),
    ]
    for key, value in state.items():
        if m := re.fullmatch(r'backbone\.encoder\.layer\.(\d+)\.attention\.([qkv])_proj\.(\w+)', key):
            qkv.setdefault((m.group(1), m.group(3)), {})[m.group(2)] = value
            continue
        if m := re.fullmatch(r'neck\.convs\.(\d)\.weight', key):
            out[f'depth_head.scratch.layer{int(m.group(1)) + 1}_rn.weight'] = value
            continue
        if m := re.fullmatch(r'neck\.fusion_stage\.layers\.(\d)\.(\w+?)(\d?)\.(.+)', key):
            # HF's fusion layer j is the original refinenet{4 - j}; it runs from the deepest map up
            index, part, number, rest = int(m.group(1)), m.group(2), m.group(3), m.group(4)
            base = f'depth_head.scratch.refinenet{4 - index}.'
            if part == 'projection':
                out[base + 'out_conv.' + rest] = value
            else:  # residual_layer{1,2}.convolution{1,2}.* -> resConfUnit{1,2}.conv{1,2}.*
                conv = re.fullmatch(r'convolution(\d)\.(\w+)', rest)
                out[base + f'resConfUnit{number}.conv{conv.group(1)}.{conv.group(2)}'] = value
            continue
        for pattern, repl in rules:
            if re.fullmatch(pattern, key):
                out[re.sub(pattern, repl, key)] = value
                break
        else:
            raise KeyError(f'unmapped Hugging Face key {key}')
    for (layer, kind), parts in qkv.items():
        out[f'pretrained.blocks.{layer}.attn.qkv.{kind}'] = torch.cat([parts['q'], parts['k'], parts['v']])
    return out


def write_original_checkpoint(path: Path, depth: int, taps, seed: int = 0):
    model = hf_depth_anything(depth, taps, seed)
    torch.save(hf_to_original(model.state_dict()), path)
    return model


# ------------------------------------------------------------------------------------------ 1. the original model
def test_all_f_matches_independent_depth_anything_v2(tmp_path):
    """A DepthAnythingV2-format checkpoint gives the independent model's depth map (518x518, taps [2,5,8,11])."""
    path = tmp_path / 'depth_anything_v2_vits_tiny.pth'
    reference = write_original_checkpoint(path, depth=12, taps=(2, 5, 8, 11))
    state = torch.load(path, weights_only=True)
    assert 'pretrained.mask_token' in state and 'depth_head.scratch.refinenet4.resConfUnit1.conv1.weight' in state
    model = JetViTDepthAnything.from_checkpoint(path, 'dinov2_vits14', embed_dim=32, depth=12, num_heads=2,
                                                **TINY_HEAD).eval()
    assert model.backbone.arch == 'F' * 12 and model.backbone.out_indices == (2, 5, 8, 11)
    x = torch.randn(1, 3, 518, 518)
    with torch.no_grad():
        expected = reference(pixel_values=x).predicted_depth
        actual = model(x)
    assert actual.shape == expected.shape == (1, 518, 518)
    assert (expected > 0).float().mean() > 0.5  # a real depth map, not the ReLU's zeros
    assert (actual - expected).abs().max() <= 1e-4 * expected.abs().max()


def test_depth_checkpoint_of_another_arch_is_refused_and_inherit_mlp_resets(tmp_path):
    """A depth runner checkpoint's backbone arch is in its state dict's spec (W and F layers have the same keys):
    loading it into another arch is refused. ``inherit='mlp'`` re-initialises q/k/v/o after loading."""
    import jetvit_mm.mm  # noqa: F401  (the reader of runner checkpoints, as for a real one)

    source = JetViTDepthAnything(arch='WWFF', **TINY, **TINY_HEAD)
    cfg = "model = dict(type='DepthEstimator', backbone=dict(type='JetViT', arch='WWFF'), decode_head=dict())\n"
    head = {f'decode_head.{k}': v for k, v in source.depth_head.state_dict().items()}
    # the arch spec in the state dict
    state = {**{f'backbone.{k}': v for k, v in source.backbone.state_dict().items()}, **head}
    torch.save({'state_dict': state, 'meta': {'cfg': cfg}}, tmp_path / 'iter_1.pth')
    with pytest.raises(ValueError, match="arch 'WWFF'"):
        JetViTDepthAnything(arch='FFFF', checkpoint=tmp_path / 'iter_1.pth', **TINY, **TINY_HEAD)
    exported = torch.load(export_mmseg_checkpoint(tmp_path / 'iter_1.pth', tmp_path / 'exported.pth'),
                          weights_only=True)
    assert ArchSpec.from_tensor(exported['state_dict'][f'backbone.{SPEC_KEY}']).arch == 'WWFF'
    loaded = JetViTDepthAnything(arch='WWFF', checkpoint=tmp_path / 'iter_1.pth', **TINY, **TINY_HEAD)
    assert torch.equal(loaded.backbone.blocks[0].attn.qkv.weight, source.backbone.blocks[0].attn.qkv.weight)
    # its W window (default 16) is checked too: no parameters tell it
    with pytest.raises(ValueError, match='built with mixers.W.window_size=16, but this model has '
                                         'mixers.W.window_size=8'):
        JetViTDepthAnything(arch='WWFF', checkpoint=tmp_path / 'iter_1.pth',
                            mixers=default_mixers(W=dict(window_size=8)), **TINY, **TINY_HEAD)

    # a segmentation checkpoint (backbone.* + a probe's decode_head.*) is not turned into a depth checkpoint
    seg = {k: v for k, v in state.items() if k.startswith('backbone.')}
    seg.update({'decode_head.conv_seg.weight': torch.zeros(19, 32, 1, 1), 'decode_head.bn.weight': torch.ones(32)})
    torch.save({'state_dict': seg}, tmp_path / 'seg.pth')
    with pytest.raises(ValueError, match=r'not a DPT head: no projects\.\*, resize_layers\.\*, scratch\.\* keys'):
        export_mmseg_checkpoint(tmp_path / 'seg.pth', tmp_path / 'seg_as_depth.pth')
    assert not (tmp_path / 'seg_as_depth.pth').exists()

    teacher = tmp_path / 'teacher.pth'
    write_original_checkpoint(teacher, depth=4, taps=(0, 1, 2, 3))
    plain = JetViTDepthAnything(arch='LWFF', checkpoint=teacher, **TINY, **TINY_HEAD)
    fresh = JetViTDepthAnything(arch='LWFF', inherit='mlp', checkpoint=teacher, **TINY, **TINY_HEAD)
    for i, letter in enumerate('LWFF'):
        same = torch.equal(fresh.backbone.blocks[i].attn.qkv.weight, plain.backbone.blocks[i].attn.qkv.weight)
        assert same == (letter == 'F'), (i, letter)
        assert torch.equal(fresh.backbone.blocks[i].mlp.fc1.weight, plain.backbone.blocks[i].mlp.fc1.weight)


def test_head_has_the_original_layout_and_presets():
    with torch.device('meta'):
        head = DPTHead.from_preset('vitl', 1024)
    shapes = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    expected = {'projects.0.weight': (256, 1024, 1, 1), 'projects.3.weight': (1024, 1024, 1, 1),
                'resize_layers.0.weight': (256, 256, 4, 4), 'resize_layers.1.weight': (512, 512, 2, 2),
                'resize_layers.3.weight': (1024, 1024, 3, 3), 'scratch.layer1_rn.weight': (256, 256, 3, 3),
                'scratch.layer4_rn.weight': (256, 1024, 3, 3), 'scratch.refinenet4.out_conv.weight': (256, 256, 1, 1),
                'scratch.refinenet1.resConfUnit2.conv2.bias': (256, ), 'scratch.output_conv1.weight': (128, 256, 3, 3),
                'scratch.output_conv2.0.weight': (32, 128, 3, 3), 'scratch.output_conv2.2.weight': (1, 32, 1, 1)}
    assert {k: shapes[k] for k in expected} == expected
    groups = sorted({re.sub(r'\.(weight|bias)$', '', k) for k in shapes})
    assert len(groups) == 4 + 3 + 4 + 4 * 5 + 1 + 2  # projects, resize_layers 0/1/3, layer*_rn, 4 x (out_conv + 4)
    assert not any('layer' in k and k.endswith('_rn.bias') for k in shapes)  # scratch convs have no bias
    assert {k: (p.features, p.out_channels) for k, p in DPT_PRESETS.items() if k != 'vitg'} == {
        'vits': (64, (48, 96, 192, 384)), 'vitb': (128, (96, 192, 384, 768)), 'vitl': (256, (256, 512, 1024, 1024))}


def test_head_loading_is_strict_and_names_the_keys(tmp_path):
    path = tmp_path / 'tiny.pth'
    write_original_checkpoint(path, depth=4, taps=(0, 1, 2, 3))
    state = torch.load(path, weights_only=True)
    del state['depth_head.scratch.refinenet4.resConfUnit1.conv1.weight']
    state['depth_head.scratch.extra.weight'] = torch.zeros(1)
    torch.save(state, path)
    with pytest.raises(RuntimeError) as err:
        JetViTDepthAnything.from_checkpoint(path, **TINY, **TINY_HEAD)
    message = str(err.value)
    assert 'scratch.refinenet4.resConfUnit1.conv1.weight' in message and 'scratch.extra.weight' in message


def test_input_sizes_and_non_multiples_of_14():
    assert depth_anything_input_size(480, 640) == (518, 686)  # NYU: 640 * 518/480 = 690.7 -> 49 * 14
    assert depth_anything_input_size(518, 518) == (518, 518)
    assert depth_anything_input_size(1000, 300) == (1722, 518)  # the short side reaches 518, never less
    assert depth_anything_input_size(50, 71) == (518, 742)
    assert depth_anything_input_size(1, 4000, size=1) == (14, 4004)  # a sliver at its own short side (size=None)
    with pytest.raises(ValueError, match=r'a 1x4000 image \(aspect ratio 4000:1\) resized to short side 518 would '
                                         r'be 518x2072000, over 67108864 pixels'):
        depth_anything_input_size(1, 4000)  # refused before any allocation
    torch.manual_seed(0)
    model = JetViTDepthAnything(**TINY, **TINY_HEAD, input_size=56).eval()
    with pytest.raises(ValueError, match='multiple of the patch size 14'):
        model(torch.randn(1, 3, 50, 71))  # forward: normalised inputs of whole patches only
    out = model.infer(torch.rand(2, 3, 50, 71))  # infer: any size, resized as DepthAnythingV2 and back
    assert out.shape == (2, 50, 71) and torch.isfinite(out).all()

    from jetvit_mm.mm.depth import DepthAnythingResize

    results = DepthAnythingResize(size=56).transform(dict(img=np.zeros((50, 71, 3), np.uint8)))
    assert results['img'].shape == (56, 84, 3) and results['img_shape'] == (56, 84)
    assert results['img'].dtype == np.float32  # resized on float pixels, as the original
    assert DepthAnythingResize(size=1022).transform(dict(img=np.zeros((768, 1024, 3), np.uint8)))['img_shape'] == \
        (1022, 1358)  # the paper's DA-2K size: short edge 1022 = 73 x 14, long edge to a multiple of 14
    with pytest.raises(ValueError, match='sliver.png: a 1x4000 image'):  # the transform refuses it, naming the file
        DepthAnythingResize().transform(dict(img=np.zeros((1, 4000, 3), np.uint8), img_path='sliver.png'))
    with pytest.raises(ValueError, match="unknown interpolation 'cubic'; valid: nearest, bilinear, bicubic"):
        DepthAnythingResize(interpolation='cubic')  # at build time, not on the first image


# ------------------------------------------------------------------------------------------ 2. metrics
def test_affine_invariant_metric_ignores_scale_and_shift_of_disparity():
    from jetvit_mm.depth import affine_invariant_errors

    gen = torch.Generator().manual_seed(0)
    gt = 0.5 + 9.5 * torch.rand(24, 32, generator=gen)
    abs_rel, delta1 = affine_invariant_errors(3.7 / gt + 0.2, gt, max_depth=10.)
    assert abs_rel < 1e-6 and delta1 == 1.  # float32 inputs
    pred = torch.rand(24, 32, generator=gen)
    base = affine_invariant_errors(pred, gt, max_depth=10.)
    for scale, shift in ((2.5, 0.), (0.01, -3.), (40., 7.)):
        assert affine_invariant_errors(scale * pred + shift, gt, max_depth=10.) == pytest.approx(base, abs=1e-6)


def test_affine_invariant_metric_known_values():
    """Hand-computed per-image values, averaged over images; invalid pixels and empty images are left out."""
    from jetvit_mm.mm.depth import AffineInvariantDepthMetric

    def sample(pred, gt):
        return dict(pred_depth_map=dict(data=torch.tensor([pred], dtype=torch.float32)),
                    gt_depth_map=dict(data=torch.tensor([gt], dtype=torch.float32)), img_path='x.jpg')

    # image A: GT disparity [1, 1, .1, .1]; fit s = 27/55, t = 47/110; the last aligned disparity (-7/110) is
    # clipped at 1e-3 (depth 1000) then to the 10 m range (exact). Pixel 5 has no GT (0) and is ignored.
    image_a = sample([[1., 1., 0., -1., 123.]], [[1., 1., 10., 10., 0.]])
    abs_rel_a, delta1_a = (2 * 9 / 101 + 36 / 47) / 4, 3 / 4
    # image B: the prediction carries no information (s = 0): every depth becomes 1 / 0.75
    image_b = sample([[1., 0., 1., 0.]], [[1., 1., 2., 2.]])
    abs_rel_b, delta1_b = 1 / 3, 0.
    empty = sample([[1., 2.]], [[0., 0.]])
    metric = AffineInvariantDepthMetric(min_depth=1e-3, max_depth=10.)
    metric.process({}, [image_a, image_b, empty])
    result = metric.compute_metrics(metric.results)
    assert result == pytest.approx(dict(abs_rel=(abs_rel_a + abs_rel_b) / 2, delta1=(delta1_a + delta1_b) / 2),
                                   abs=1e-6)
    assert AffineInvariantDepthMetric.higher_is_better == {'abs_rel': False, 'delta1': True}
    # the same aligned maps scored as disparities (GT disparity 1 / gt): A [101/110, 101/110, 47/110, 0.1] against
    # [1, 1, 0.1, 0.1]; B 0.75 everywhere against [1, 1, 0.5, 0.5]
    metric = AffineInvariantDepthMetric(min_depth=1e-3, max_depth=10., space='disparity')
    metric.process({}, [image_a, image_b, empty])
    assert metric.compute_metrics(metric.results) == pytest.approx(
        dict(abs_rel=((2 * 9 / 110 + 36 / 11) / 4 + 0.375) / 2, delta1=(3 / 4 + 0.) / 2), abs=1e-6)
    with pytest.raises(ValueError, match=r"unknown space 'inverse'; valid: depth, disparity"):
        AffineInvariantDepthMetric(space='inverse')
    # a prediction that is NaN / infinite where the GT is valid fails its image; outside the valid GT it is ignored
    # (the ground truth alone decides which pixels count)
    half_nan = sample([[1., float('nan'), 0., -1.]], [[1., 1., 10., 10.]])
    nan_off_gt = sample([[1., 1., 0., -1., float('inf')]], [[1., 1., 10., 10., 0.]])
    metric = AffineInvariantDepthMetric(min_depth=1e-3, max_depth=10.)
    metric.process({}, [half_nan, nan_off_gt])
    assert metric.results[0] == (math.inf, 0.)
    assert metric.results[1] == pytest.approx((abs_rel_a, delta1_a), abs=1e-6)
    assert metric.compute_metrics(metric.results) == dict(abs_rel=math.inf, delta1=pytest.approx(delta1_a / 2))
    metric = AffineInvariantDepthMetric(min_depth=1e-3, max_depth=10.)
    metric.process({}, [sample([[float('nan')] * 4], [[1., 1., 10., 10.]])])  # an all-NaN model is scored, as inf
    assert metric.compute_metrics(metric.results) == dict(abs_rel=math.inf, delta1=0.)


def test_da2k_metric_counts_pairs():
    from jetvit_mm.mm.depth import DA2KMetric

    pred = torch.arange(20, dtype=torch.float32).reshape(1, 4, 5)  # disparity grows with row and column
    pairs = [dict(point1=[3, 4], point2=[0, 0], closer_point='point1'),  # right
             dict(point1=[0, 1], point2=[2, 2], closer_point='point2'),  # right
             dict(point1=[0, 1], point2=[2, 2], closer_point='point1'),  # wrong
             dict(point1=[1, 1], point2=[1, 1], closer_point='point1')]  # a tie is wrong
    metric = DA2KMetric()
    metric.process({}, [dict(pred_depth_map=dict(data=pred), da2k_pairs=pairs, img_path='a.jpg'),
                        dict(pred_depth_map=dict(data=pred), da2k_pairs=pairs[:1], img_path='b.jpg')])
    assert metric.compute_metrics(metric.results) == dict(da2k_acc=pytest.approx(100 * 3 / 5))
    assert DA2KMetric.higher_is_better == {'da2k_acc': True}
    with pytest.raises(ValueError, match=r'c\.jpg: pair 0: point2 \[4, 0\] is outside'):
        metric.process({}, [dict(pred_depth_map=dict(data=pred), img_path='c.jpg',
                                 da2k_pairs=[dict(point1=[0, 0], point2=[4, 0], closer_point='point1')])])


def test_da2k_point_frame_follows_exif_orientation(tmp_path):
    """DA-2K points are checked against the image as the pipeline loads it (OpenCV applies EXIF rotation)."""
    import mmcv
    from PIL import Image

    from jetvit_mm.depth.formats import image_size
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees on display
    Image.fromarray(np.zeros((40, 80, 3), np.uint8)).save(tmp_path / 'rotated.jpg', exif=exif)
    Image.fromarray(np.zeros((40, 80, 3), np.uint8)).save(tmp_path / 'plain.jpg')
    for name in ('rotated.jpg', 'plain.jpg'):
        assert image_size(str(tmp_path / name)) == mmcv.imread(str(tmp_path / name)).shape[:2], name


def test_da2k_dataset_and_accuracy_on_generated_benchmark(tmp_path):
    """The true disparity scores 100 %, the true depth (the wrong order) 0 %; bad points name file and pair."""
    from jetvit_mm.mm.depth import DA2KDataset, DA2KMetric

    from .fixtures.datasets import make_da2k

    root = make_da2k(tmp_path / 'da2k', images_per_scene=2, scenes=('indoor', 'outdoor'), pairs_per_image=3,
                     size=(48, 64), seed=0, save_depth=True)
    dataset = DA2KDataset(data_root=str(root))
    annotations = json.loads((root / 'annotations.json').read_text())
    assert len(dataset) == 4
    assert [dataset.get_data_info(i)['da2k_pairs'] for i in range(4)] == list(annotations.values())
    scores = {}
    for name, to_pred in (('disparity', lambda d: 1. / d), ('depth', lambda d: d)):
        metric = DA2KMetric()
        for i in range(len(dataset)):
            info = dataset.get_data_info(i)
            rel = Path(info['img_path']).relative_to(root / 'images')
            depth = cv2.imread(str(root / 'depth' / rel.with_suffix('.png')), cv2.IMREAD_UNCHANGED).astype(np.float32)
            pred = to_pred(torch.from_numpy(depth / 1000.))[None]
            metric.process({}, [dict(pred_depth_map=dict(data=pred), da2k_pairs=info['da2k_pairs'],
                                     img_path=info['img_path'])])
        scores[name] = metric.compute_metrics(metric.results)['da2k_acc']
    assert scores == dict(disparity=100., depth=0.)

    first = next(iter(annotations))
    annotations[first][1]['point2'] = [48, 3]  # row 48 of a 48-row image
    (root / 'annotations.json').write_text(json.dumps(annotations))
    with pytest.raises(ValueError, match=rf'annotations\.json: image {re.escape(repr(first))}: pair 1: point2 '
                                         r'\[48, 3\] is outside the image \(48x64'):
        DA2KDataset(data_root=str(root))


def test_ssi_loss_is_invariant_and_trains_the_head():
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    from jetvit_mm.mm.depth import DPTDepthHead, ScaleShiftInvariantLoss

    gen = torch.Generator().manual_seed(0)
    target = torch.rand(2, 1, 12, 16, generator=gen) + 0.1
    pred = torch.rand(2, 1, 12, 16, generator=gen, requires_grad=True)
    loss = ScaleShiftInvariantLoss(gradient_weight=2.0)
    assert loss(3 * target - 0.5, target).item() < 1e-4 < loss(pred, target).item()
    assert loss(7 * pred + 2, target).item() == pytest.approx(loss(pred, target).item(), rel=1e-4)
    loss(pred, target).backward()
    assert pred.grad.abs().sum() > 0

    # DepthAnythingV2's guard on pseudo-labels: each image's 10 % largest residuals are not counted, by either term
    from jetvit_mm.depth import ssi_loss

    valid = torch.rand(2, 12, 16, generator=gen) > 0.2
    full_loss, full, _ = ssi_loss(pred[:, 0], target[:, 0], valid)
    top_loss, kept_residuals, kept = ssi_loss(pred[:, 0], target[:, 0], valid, ignore_top=0.1)
    means = []
    for r, k, v in zip(full, kept, valid):
        assert not (k & ~v).any() and abs(int(k.sum()) - 0.9 * int(v.sum())) <= 1
        assert r[v & ~k].abs().min() >= r[k].abs().max()  # the dropped ones are the largest
        means.append(r[k].abs().mean())
    assert top_loss.item() == pytest.approx(torch.stack(means).mean().item(), rel=1e-6)
    assert top_loss.item() < full_loss.item()
    assert all(torch.equal(r, f * k) for r, f, k in zip(kept_residuals, full, kept))
    with_top = ScaleShiftInvariantLoss(gradient_weight=2.0, ignore_top=0.1)
    assert with_top(pred, target, valid[:, None]).item() < loss(pred, target, valid[:, None]).item()
    with pytest.raises(ValueError, match=r'ignore_top is a fraction of the pixels in \[0, 1\), got 1.0'):
        ScaleShiftInvariantLoss(ignore_top=1.0)

    head = DPTDepthHead(in_channels=32, **TINY_HEAD)
    feats = [torch.randn(2, 32, 3, 4) for _ in range(4)]
    samples = []
    for _ in range(2):
        sample = SegDataSample(metainfo=dict(img_shape=(42, 56), pad_shape=(42, 56)))
        depth = torch.rand(1, 42, 56, generator=gen) * 5
        depth[:, :5] = 0  # no ground truth there
        sample.gt_depth_map = PixelData(data=depth)
        samples.append(sample)
    losses = head.loss(feats, samples)
    assert set(losses) == {'loss_ssi'} and torch.isfinite(losses['loss_ssi'])
    losses['loss_ssi'].backward()
    assert head.projects[0].weight.grad is not None
    assert head.predict(feats, [s.metainfo for s in samples]).shape == (2, 1, 42, 56)


# ------------------------------------------------------------------------------------------ 3. through the tools
@pytest.fixture(scope='module')
def depth_data(tmp_path_factory):
    from .fixtures.datasets import make_da2k, make_depth

    root = tmp_path_factory.mktemp('depth')
    teacher = root / 'depth_anything_v2_tiny.pth'
    write_original_checkpoint(teacher, depth=4, taps=(0, 1, 2, 3), seed=1)
    return dict(
        root=root, teacher=teacher,
        nyu=make_depth(root / 'nyu', splits={'train': 4, 'test': 2}, size=(48, 64), seed=0),
        da2k=make_da2k(root / 'da2k', images_per_scene=1, scenes=('indoor', 'outdoor'), pairs_per_image=4,
                       size=(48, 64), seed=0))


def infer_image_reference(model: JetViTDepthAnything, image_path: Path, size: int) -> torch.Tensor:
    """DepthAnythingV2's ``infer_image(image, input_size=size)`` without mmengine: cv2 bicubic on RGB/255 to
    :func:`depth_anything_input_size`, ImageNet norm, the model, bilinear align_corners back to the image size."""
    rgb = cv2.cvtColor(cv2.imread(str(image_path)), cv2.COLOR_BGR2RGB) / 255.0
    h, w = rgb.shape[:2]
    new_h, new_w = depth_anything_input_size(h, w, size=size)
    x = (cv2.resize(rgb, (new_w, new_h), interpolation=cv2.INTER_CUBIC) - [0.485, 0.456, 0.406]) \
        / [0.229, 0.224, 0.225]
    with torch.no_grad():
        disparity = model(torch.from_numpy(x.transpose(2, 0, 1)).float()[None])
    return torch.nn.functional.interpolate(disparity[:, None], (h, w), mode='bilinear', align_corners=True)[0, 0]


def reference_nyu_metrics(checkpoint: Path, arch: str, nyu: Path) -> dict:
    """DepthAnythingV2's ``infer_image`` (cv2 bicubic on RGB/255, ImageNet norm, bilinear align_corners back)
    and :func:`affine_invariant_errors`, without mmengine (the tiny configs' model: TINY,
                                                           mixers.W.window_size=2)."""
    from jetvit_mm.depth import affine_invariant_errors

    model = JetViTDepthAnything.from_checkpoint(checkpoint, arch=arch, mixers=default_mixers(W=dict(window_size=2)),
                                                **TINY, **TINY_HEAD).eval()
    errors = []
    for image_path in sorted((nyu / 'images' / 'test').glob('*.jpg')):
        disparity = infer_image_reference(model, image_path, size=56)
        gt = cv2.imread(str(nyu / 'annotations' / 'test' / f'{image_path.stem}.png'), cv2.IMREAD_UNCHANGED)
        errors.append(affine_invariant_errors(disparity, torch.from_numpy(gt.astype(np.float32) / 1000.),
                                              min_depth=1e-3, max_depth=10.))
    return dict(abs_rel=float(np.mean([e[0] for e in errors])), delta1=float(np.mean([e[1] for e in errors])))


@pytest.mark.integration
def test_depth_pipeline_distill_search_test_finetune(depth_data, tmp_path):
    """Supernet distillation on the four tapped layers -> beam search scored by DA-2K accuracy with the teacher's
    DPT head -> tools/test.py (DA-2K accuracy; AbsRel/delta1 equal to DepthAnythingV2's own protocol) ->
    pseudo-label fine-tuning of the searched hybrid."""
    d = depth_data
    nyu = [f'{split}_dataloader.dataset.data_root={d["nyu"]}' for split in ('train', 'val', 'test')]
    head = export_mmseg_checkpoint(d['teacher'], tmp_path / 'teacher_mmseg.pth')  # backbone.* + decode_head.*

    # 1. distillation of the {L, W} supernet (images only)
    proc = run_tool('train.py', CONFIGS / 'depth_distill_tiny.py', '--work-dir', tmp_path / 'distill',
                    '--cfg-options', nyu[0], f'model.teacher.checkpoint={d["teacher"]}')
    assert re.search(r'Iter\(train\) \[4/4\].*loss_distill: \d', proc.stdout + proc.stderr)

    # 2. Step-1 search scored by DA-2K accuracy (its direction declared by DA2KMetric)
    search_dir = tmp_path / 'search'
    run_tool('search.py', CONFIGS / 'depth_search_tiny_da2k.py', tmp_path / 'distill' / 'iter_4.pth', '--stage', '1',
             '--metric', 'da2k_acc', '--head-checkpoint', head, '--beam-width', '2', '--min-gain', '0.0',
             '--work-dir', search_dir, '--export', '--device', 'cpu',
             '--cfg-options', f'val_dataloader.dataset.data_root={d["da2k"]}')
    summary = json.loads((search_dir / 'search.json').read_text())
    best = summary['best']['1']['arch']
    assert summary['higher_is_better'] and re.fullmatch('[LW]{4}', best)
    assert all(0 <= r['score'] <= 100 for r in summary['archs'])
    hybrid = search_dir / f'hybrid_{best}_with_head.pth'
    assert depth_state(torch.load(hybrid, weights_only=True)['state_dict'])[1].startswith('backbone')

    # 3. tools/test.py: DA-2K accuracy of the exported hybrid equals the search's score; AbsRel / delta1 on NYU
    out = tmp_path / 'da2k.json'
    run_tool('test.py', CONFIGS / 'depth_search_tiny_da2k.py', hybrid, '--work-dir', tmp_path / 't1', '--out', out,
             '--cfg-options', f'model.backbone.arch={best}', f'test_dataloader.dataset.data_root={d["da2k"]}')
    assert json.loads(out.read_text())['da2k_acc'] == pytest.approx(summary['best']['1']['score'])
    out = tmp_path / 'nyu.json'
    run_tool('test.py', CONFIGS / 'depth_eval_tiny_nyu.py', hybrid, '--work-dir', tmp_path / 't2', '--out', out,
             '--cfg-options', f'model.backbone.arch={best}', nyu[2])
    metrics = json.loads(out.read_text())
    assert set(metrics) == {'abs_rel', 'delta1'}
    assert metrics == pytest.approx(reference_nyu_metrics(hybrid, best, d['nyu']), abs=1e-5)

    # 4. pseudo-label fine-tuning of the hybrid on the teacher's disparities, then validation
    proc = run_tool('train.py', CONFIGS / 'depth_pseudolabel_tiny.py', '--work-dir', tmp_path / 'ft',
                    '--cfg-options', nyu[0], nyu[1], f'model.teacher.checkpoint={d["teacher"]}',
                    f'model.backbone.arch={best}', f'model.backbone.checkpoint={search_dir / f"hybrid_{best}.pth"}',
                    f'model.decode_head.checkpoint={d["teacher"]}')
    log = proc.stdout + proc.stderr
    losses = [float(v) for v in re.findall(r'decode\.loss_ssi: ([\d.]+)', log)]
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
    assert re.search(r'Iter\(val\) .*abs_rel: [\d.]+\s+delta1: [\d.]+', log)
