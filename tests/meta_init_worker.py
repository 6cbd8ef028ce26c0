"""Run under torchrun by tests/test_meta_init.py: build a distiller (teacher from a checkpoint, supernet student on
its weights) and shard it with :class:`FSDP2Wrapper`, either today's way (``full``: every rank builds and loads the
whole model, then shards) or on the meta device (``meta``: build on meta, shard, load each rank's shard).

Memory: the peak resident set (``VmHWM``) of the build + load over the resident set just before it, the peak mark
reset first (``/proc/self/clear_refs``). RSS counts what the process holds, whatever the machine's load; glibc's
mmap threshold is fixed by the test (``MALLOC_MMAP_THRESHOLD_``) so that freed tensors leave the resident set.
Each rank writes ``OUT/<mode>_<rank>.json`` (peak, its shard's bytes); rank 0 also the full state dict after loading
and the names initialised rather than loaded (``OUT/<mode>.pt``)."""
import json
import sys

import torch
import torch.distributed as dist
from mmengine.registry import MODEL_WRAPPERS
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

import jetvit_mm.mm  # noqa: F401  (registrations)
from jetvit_mm.benchmark.memory import _reset_peak_rss, _status_bytes
from jetvit_mm.mm.models.distiller import build_on_meta
from jetvit_mm.mm.registry import MODELS
from jetvit_mm.models.mixers import default_mixers

BACKBONE = dict(model_name='dinov3_vits16', embed_dim=384, depth=8, num_heads=6,
                mixers=default_mixers(W=dict(window_size=2)))


def config(checkpoint: str) -> dict:
    return dict(type='FeatureDistiller', teacher=dict(type='JetViT', checkpoint=checkpoint, **BACKBONE),
                student=dict(type='JetViTSupernet', search_space='LWF', **BACKBONE))


def main(out: str, mode: str, checkpoint: str) -> None:
    dist.init_process_group('gloo')
    rank = dist.get_rank()
    torch.manual_seed(0)
    if not _reset_peak_rss():
        raise RuntimeError('/proc/self/clear_refs is not writable: the peak cannot be measured')
    before = _status_bytes('VmRSS')
    model = build_on_meta(config(checkpoint)) if mode == 'meta' else MODELS.build(config(checkpoint))
    wrapped = MODEL_WRAPPERS.build(dict(type='FSDP2Wrapper', module=model, param_dtype=None, reduce_dtype=None))
    peak = _status_bytes('VmHWM') - before
    shard = sum(p.to_local().numel() * p.element_size() for p in model.parameters())
    with open(f'{out}/{mode}_{rank}.json', 'w') as f:
        json.dump(dict(peak=peak, shard=shard), f)
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        torch.save(dict(state=state, initialised=wrapped.initialised), f'{out}/{mode}.pt')
    dist.barrier()
    dist.destroy_process_group()


if __name__ == '__main__':
    main(*sys.argv[1:4])
