"""torch.compile of whole JetViT models with their heads: one graph (``fullgraph=True``: no graph break in the blocks
or anywhere else), compiled == eager.

Both teacher families (DINOv3: RoPE and 4 registers; DINOv2: absolute position embedding, 1 prefix token), every
mixer letter, the linear-probe segmentation head, the detection neck (the simple feature pyramid the Mask R-CNN
configs put on the backbone; mmdet's proposal and RoI heads stay eager) and the DPT depth head; W through the
torch path (fused by inductor) and through FlexAttention.
"""
import warnings
from typing import Sequence

import pytest
import torch
import torch._dynamo
import torch._inductor.config
from torch import nn
from torch._dynamo.utils import counters

import jetvit_mm.mm  # noqa: F401  (registers LinearProbeHead's loss for mmseg)
from jetvit_mm.mm.models.seg_heads import LinearProbeHead
from jetvit_mm.models import JetViT
from jetvit_mm.models.depth_anything import JetViTDepthAnything
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.mixers.kernels.availability import compile_available
from jetvit_mm.models.necks.simple_fpn import SimpleFeaturePyramid

pytestmark = pytest.mark.skipif(not compile_available('cpu'), reason='torch.compile needs a C++ compiler')


class SegmentationAndDetection(nn.Module):
    """A backbone feeding the linear probe (segmentation logits) and the simple feature pyramid (detection)."""

    def __init__(self, backbone: JetViT, num_classes: int = 5) -> None:
        super().__init__()
        self.backbone = backbone
        self.probe = LinearProbeHead(in_channels=backbone.embed_dim, num_classes=num_classes)
        self.neck = SimpleFeaturePyramid(backbone.embed_dim, out_channels=16)

    def forward(self, x: torch.Tensor) -> Sequence[torch.Tensor]:
        maps = self.backbone(x)
        return (self.probe(maps), *self.neck(maps))


def randomize_(module: nn.Module, seed: int = 0) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.05)  # also moves the zero-initialised L convs
    return module.eval()


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled_equals_eager(model: nn.Module, x: torch.Tensor, freezing: bool = False) -> None:
    with torch.inference_mode(), torch._inductor.config.patch(freezing=freezing):
        eager = model(x)
        out = torch.compile(model, fullgraph=True)(x)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = eager if isinstance(eager, (tuple, list)) else (eager,)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        torch.testing.assert_close(o, r, rtol=1e-5, atol=1e-5 * r.abs().max().item())


def test_dinov3_jetvit_with_probe_and_detection_neck_compiles_in_one_graph(fresh_dynamo):
    backbone = JetViT('dinov3_vits16', arch='LWFL', embed_dim=32, depth=4, num_heads=2,
                      mixers=default_mixers(W=dict(window_size=2), L=dict(conv='squeeze')))
    compiled_equals_eager(randomize_(SegmentationAndDetection(backbone)), torch.randn(2, 3, 80, 96))


def test_depth_model_compiles_in_one_graph_with_flex_window_attention(fresh_dynamo):
    model = JetViTDepthAnything('dinov2_vits14', arch='WLFW', embed_dim=32, depth=4, num_heads=2,
                                out_indices=(0, 1, 2, 3), features=16, out_channels=(8, 16, 32, 32),
                                mixers=default_mixers(W=dict(window_size=2, kernel='flex'),
                                                      L=dict(conv='static', focusing=3.0)))
    compiled_equals_eager(randomize_(model), torch.randn(1, 3, 70, 84))


@pytest.mark.parametrize('prefix_keys_in_flex', [True, False], ids=['cpu', 'gpu_formulation'])
def test_a_model_with_flex_windows_compiles_in_one_graph_from_cold_caches(fresh_dynamo, monkeypatch,
                                                                          prefix_keys_in_flex):
    """Compiled before any eager forward, as a deployment script does: W's block masks and token orders are not
    kept yet and are built inside the graph. An eager build of a missing one broke the graph in every W layer, and
    a graph once broken stayed so on later calls."""
    from jetvit_mm.models.mixers import window as window_module
    from jetvit_mm.models.mixers.kernels import window_flex

    monkeypatch.setattr(window_flex, '_CACHE', {})
    if not prefix_keys_in_flex:  # the GPU's formulation: Flex runs eagerly on the CPU (a compiled CPU Flex has no LSE)
        monkeypatch.setattr(window_flex, 'NO_LSE', ())
        monkeypatch.setattr(window_module, 'compiled', lambda fn, shape=None: fn)
        warnings.filterwarnings('ignore', message='flex_attention called without torch.compile')
    model = randomize_(JetViT('dinov3_vits16', arch='WLFW', embed_dim=32, depth=4, num_heads=2,
                              mixers=default_mixers(W=dict(window_size=2, kernel='flex'), L=dict(conv='squeeze'))))
    x = torch.randn(1, 3, 80, 96)
    with torch.no_grad():
        out = torch.compile(model, fullgraph=True, backend='inductor' if prefix_keys_in_flex else 'aot_eager')(x)
        assert not window_flex._CACHE  # nothing was built outside the graph
        for o, r in zip(out, model(x)):
            torch.testing.assert_close(o, r, rtol=1e-5, atol=1e-5 * r.abs().max().item())


def test_compiled_with_freezing_equals_eager(fresh_dynamo):
    """Inductor's freezing (weights folded as constants, CPU Linears prepacked with their bias and GELU fused: the
    setting tools/benchmark.py --freeze and docs/deploy.md use for CPU inference) computes what eager does."""
    backbone = JetViT('dinov3_vits16', arch='LWFL', embed_dim=32, depth=4, num_heads=2,
                      mixers=default_mixers(W=dict(window_size=2), L=dict(conv='squeeze')))
    counters.clear()
    compiled_equals_eager(randomize_(SegmentationAndDetection(backbone)), torch.randn(1, 3, 80, 96), freezing=True)
    assert counters['inductor']['mkldnn_linear_weight_pack_matcher_count'] > 0  # freezing did run its CPU passes
