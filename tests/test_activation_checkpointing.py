"""Per-block activation checkpointing of the student (``model.student.grad_checkpointing=True``): the blocks are really
recomputed in the backward pass, and the distillation loss and every gradient are those of the plain run."""
import copy

import pytest
import torch

import jetvit_mm.mm  # noqa: F401  (registrations)
from jetvit_mm.mm.registry import MODELS
from jetvit_mm.models.mixers import default_mixers

BACKBONE = dict(model_name='dinov3_vits16', embed_dim=32, depth=3, num_heads=2,
                mixers=default_mixers(W=dict(window_size=2)))


def distiller(checkpointing: bool, **backbone):
    backbone = {**BACKBONE, **backbone}
    torch.manual_seed(0)
    return MODELS.build(dict(type='FeatureDistiller', teacher=dict(type='JetViT', **backbone),
                             student=dict(type='JetViTSupernet', search_space='LWF', drop_path_rate=0.2,
                                          grad_checkpointing=checkpointing, **backbone),
                             distill_indices=(1, 2)))


def step(model, x: torch.Tensor, arch: str):
    model.student.set_arch(arch)
    torch.manual_seed(1)  # drop path draws: checkpointing must replay the same ones
    loss = model.loss(x)['loss_distill']
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.student.named_parameters() if p.grad is not None}


@pytest.mark.filterwarnings('ignore:FeatureDistiller')
@pytest.mark.parametrize('model_name', ['dinov3_vits16', 'dinov2_vits14'])
def test_checkpointing_gives_the_same_loss_and_gradients(model_name):
    size = 32 if model_name.startswith('dinov3') else 28
    x = torch.randn(2, 3, size, 2 * size, generator=torch.Generator().manual_seed(2))
    plain = distiller(False, model_name=model_name)
    with torch.no_grad():  # a student that differs from its teacher: non-zero loss and gradients
        for p in plain.student.parameters():
            p.add_(0.05 * torch.randn_like(p))
    checkpointed = copy.deepcopy(plain)
    checkpointed.student.set_grad_checkpointing(True)
    assert plain.student.grad_checkpointing is False and checkpointed.student.grad_checkpointing is True

    calls = []
    hook = checkpointed.student.blocks[0].register_forward_pre_hook(lambda *_: calls.append(1))
    plain.train(), checkpointed.train()
    for arch in ('LWF', 'FLW'):
        loss_a, grads_a = step(plain, x, arch)
        calls.clear()
        loss_b, grads_b = step(checkpointed, x, arch)
        assert len(calls) == 2  # block 0 ran again in the backward pass: the activations were not kept
        assert loss_a.item() > 0 and torch.equal(loss_a, loss_b)
        assert grads_a.keys() == grads_b.keys() and len(grads_a) > 10
        for name, grad in grads_a.items():
            assert torch.allclose(grad, grads_b[name], rtol=1e-5, atol=1e-7), name
        plain.zero_grad(), checkpointed.zero_grad()
    hook.remove()


def test_checkpointing_is_a_training_switch_only():
    model = distiller(True)
    assert 'grad_checkpointing' not in model.student.build_args  # not in the spec, not in exports
    calls = []
    model.student.blocks[0].register_forward_pre_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        model.student.forward_features(torch.randn(1, 3, 32, 32))
    assert len(calls) == 1
