"""The patch embedding as a reshape + matmul (issue #39 item 4, jetvit_mm/models/patch_embed.py): the same values as
the convolution to float rounding, the same parameters and state-dict keys, for a JetViT hybrid and a timm teacher
alike; a convolution that is no plain patchify keeps computing as a convolution; a bad name is refused."""
import pytest
import timm
import torch
from torch import nn

from jetvit_mm.models.jetvit import JetViT
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.patch_embed import MatmulPatchConv, set_patch_embed_

TINY = dict(model_name='dinov3_vits16', depth=2, embed_dim=32, num_heads=2,
            mixers=default_mixers(W=dict(window_size=2)))


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    scale = b.abs().max().item()
    assert (a - b).abs().max().item() <= 1e-5 * scale, ((a - b).abs().max().item(), scale)


def test_a_hybrid_computes_the_same_with_the_same_state_dict():
    torch.manual_seed(0)
    model = JetViT(arch='LW', **TINY).eval()
    x = torch.randn(2, 3, 32, 48)
    with torch.no_grad():
        conv_tokens = model.patch_embed(x)
        conv_out = model(x)[0]
    keys = list(model.state_dict())
    assert set_patch_embed_(model, 'matmul') is model and type(model.patch_embed.proj) is MatmulPatchConv
    with torch.no_grad():
        tokens = model.patch_embed(x)
        out = model(x)[0]
    assert tokens.shape == conv_tokens.shape and list(model.state_dict()) == keys
    _close(tokens, conv_tokens)
    _close(out, conv_out)
    set_patch_embed_(model, 'conv')
    assert type(model.patch_embed.proj) is nn.Conv2d


def test_values_and_gradients_equal_the_convolutions():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 8, 4, stride=4)
    fast = MatmulPatchConv(3, 8, 4, stride=4)
    fast.load_state_dict(conv.state_dict())
    x = torch.randn(2, 3, 14, 19)  # no multiple of the patch: the convolution drops the remainder, so does the matmul
    grad = torch.randn(2, 8, 3, 4)
    expected, got = conv(x), fast(x)
    _close(got, expected)
    expected.backward(grad)
    got.backward(grad)
    for name, p in fast.named_parameters():
        _close(p.grad, dict(conv.named_parameters())[name].grad)


def test_a_timm_teacher_and_a_convolution_that_is_no_patchify():
    torch.manual_seed(0)
    teacher = timm.create_model('vit_small_patch16_224', pretrained=False, depth=1, embed_dim=32, num_heads=2,
                                img_size=32).eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        expected = teacher(x)
        got = set_patch_embed_(teacher, 'matmul')(x)
    assert type(teacher.patch_embed.proj) is MatmulPatchConv
    _close(got, expected)
    overlapping = MatmulPatchConv(3, 4, 3, stride=2, padding=1)
    assert not overlapping.patchifies()
    assert torch.equal(overlapping(x), nn.functional.conv2d(x, overlapping.weight, overlapping.bias, 2, 1))


def test_a_bad_name_is_refused():
    with pytest.raises(ValueError, match="unknown patch embedding 'gemm'; valid: 'conv', 'matmul'"):
        set_patch_embed_(nn.Module(), 'gemm')


def test_the_models_benchmark_times_every_model_with_the_patch_embedding_asked_for(monkeypatch):
    import jetvit_mm.benchmark.models as model_bench

    seen, built = [], model_bench.build_model
    monkeypatch.setattr(model_bench, 'build_model', lambda *a: seen.append(built(*a)) or seen[-1])
    kwargs = model_bench.jetvit_kwargs(dict(depth=2, embed_dim=32, num_heads=2), 'dinov3_vits16', window=2)
    model_bench.benchmark_models(
        model_bench.model_entries(kwargs, ['LW']), sizes=[(32, 32)], batch=1, dtype='fp32', device='cpu', warmup=0,
        repeat=1, compile_model=False, cuda_graph=False, throughput=None, threads=1, memory=False, profile=False,
        malloc='system', malloc_kept=False, patch_embed='matmul')
    assert len(seen) == 2 and all(type(m.patch_embed.proj) is MatmulPatchConv for m in seen)  # teacher and LW
