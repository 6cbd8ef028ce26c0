"""Run under torchrun by tests/test_fsdp.py: one FSDP2 distillation step per case, on this rank's half of a fixed batch;
rank 0 writes the mean loss and the full updated state dict of each case to ``OUT/<case>.pt``."""
import itertools
import json
import sys

import torch
import torch.distributed as dist
from mmengine.optim import build_optim_wrapper
from mmengine.registry import MODEL_WRAPPERS
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

import jetvit_mm.mm  # noqa: F401  (registrations)
from jetvit_mm.distill.fsdp2 import collective_device
from jetvit_mm.mm.registry import MODELS
from jetvit_mm.models.mixers import default_mixers

BACKBONE = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2,
                mixers=default_mixers(W=dict(window_size=2)))
ARCH = 'LWFL'
OPTIM = dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=1.0), clip_grad=None)


def build(grad_checkpointing: bool = False):
    torch.manual_seed(0)
    model = MODELS.build(dict(type='FeatureDistiller', teacher=dict(type='JetViT', **BACKBONE),
                              student=dict(type='JetViTSupernet', search_space='LWF',
                                           grad_checkpointing=grad_checkpointing, **BACKBONE),
                              distill_indices=(1, 3)))
    model.student.set_arch(ARCH)
    g = torch.Generator().manual_seed(1)
    # LayerScale 1e-5 makes a random ViT near the identity: visible blocks, and a student off its teacher
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith('gamma'):
                p.fill_(0.5)
            if name.startswith('student.'):
                p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model


def batch() -> torch.Tensor:
    return torch.randn(4, 3, 32, 64, generator=torch.Generator().manual_seed(4))


def broadcasts_while(fn, *args, **kwargs):
    """Run ``fn`` with ``dist.broadcast`` watched: return fn's result and, per broadcast tensor, (device, shape,
    dtype), the real broadcast still done."""
    real, seen = dist.broadcast, []

    def watched(tensor, *b_args, **b_kwargs):
        seen.append((str(tensor.device), tuple(tensor.shape), str(tensor.dtype)))
        return real(tensor, *b_args, **b_kwargs)

    dist.broadcast = watched
    try:
        return fn(*args, **kwargs), seen
    finally:
        dist.broadcast = real


def main(out: str, cases: dict) -> None:
    dist.init_process_group('gloo')
    rank, world = dist.get_rank(), dist.get_world_size()
    x = batch().chunk(world)[rank]
    for name, options in cases.items():
        model = build(options.pop('grad_checkpointing', False))
        expected = [(str(collective_device()), tuple(t.shape), str(t.dtype))
                    for t in itertools.chain(model.parameters(), model.buffers())]
        wrapped, broadcasts = broadcasts_while(MODEL_WRAPPERS.build,
                                               dict(type='FSDP2Wrapper', module=model, **options))
        local = sum(p.to_local().numel() for p in model.parameters()) / sum(p.numel() for p in model.parameters())
        optim_wrapper = build_optim_wrapper(wrapped, OPTIM)
        log_vars = wrapped.train_step(dict(inputs=x), optim_wrapper)
        with torch.no_grad():  # the distillation loss as the wrapped model returns it (param_dtype features)
            loss_dtype = str(wrapped(x, mode='loss')['loss_distill'].dtype)
        loss = torch.tensor(float(log_vars['loss']))
        dist.all_reduce(loss)
        state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if rank == 0:
            result = dict(loss=loss.item() / world, state=state, units=wrapped.num_units, local=local,
                          broadcasts=broadcasts, expected_broadcasts=expected, loss_dtype=loss_dtype)
            torch.save(result, f'{out}/{name}.pt')
        dist.barrier()
    dist.destroy_process_group()


if __name__ == '__main__':
    main(sys.argv[1], json.loads(sys.argv[2]))
