"""FSDP2 (``torch.distributed.fsdp.fully_shard``) for models that hold JetViTs, in pure torch.

Every transformer block of every JetViT in the model (a student supernet and its frozen teacher alike) is its own
FSDP2 unit; the rest (patch embeddings, tokens, final norms, heads) is the root unit. Before sharding, every rank takes
rank 0's parameters and buffers, on the process group's device (NCCL only moves CUDA tensors). The mmengine wrapper
(``jetvit_mm.mm.fsdp.FSDP2Wrapper``) and the GPU check's NCCL step both shard through :func:`shard_model`.
"""
import itertools
from typing import List, Optional

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

from jetvit_mm.models.jetvit import JetViT


def collective_device() -> torch.device:
    """Where the default process group's collectives take their tensors: the current CUDA device under NCCL, the CPU
    under gloo."""
    if dist.get_backend() == 'nccl':
        return torch.device('cuda', torch.cuda.current_device())
    return torch.device('cpu')


def broadcast_from_rank0(module: nn.Module) -> None:
    """Give every rank rank 0's parameters and buffers. Only those: ``state_dict()`` also holds tensors made on the fly
    on the CPU (each JetViT's arch-spec extra state), which an NCCL group cannot broadcast and every rank builds alike.
    A tensor that does not live on the group's device goes through a copy there."""
    device = collective_device()
    with torch.no_grad():
        for tensor in itertools.chain(module.parameters(), module.buffers()):
            if tensor.device == device:
                dist.broadcast(tensor, src=0)
            else:
                staged = tensor.to(device)
                dist.broadcast(staged, src=0)
                tensor.copy_(staged)


def shard_units(model: nn.Module) -> List[nn.Module]:
    """The modules sharded as their own FSDP2 units: every block of every JetViT in ``model``, in model order."""
    return [block for module in model.modules() if isinstance(module, JetViT) for block in module.blocks]


def shard_model(model: nn.Module, param_dtype: Optional[torch.dtype] = None,
                reduce_dtype: Optional[torch.dtype] = None, cpu_offload: bool = False,
                reshard_after_forward: bool = True) -> int:
    """Sync ``model`` from rank 0, then shard it in place: one FSDP2 unit per JetViT block and the root. Returns the
    number of units. ``param_dtype``: dtype the parameters are gathered and computed in (None: their own);
    ``reduce_dtype``: dtype gradients are reduce-scattered in."""
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError('FSDP2 sharding needs a process group: launch with torchrun (and --launcher pytorch)')
    units = shard_units(model)
    if not units:
        raise ValueError('FSDP2: the model holds no JetViT, so there is no transformer block to shard')
    device = collective_device()
    mesh = init_device_mesh(device.type, (dist.get_world_size(), ))
    options = dict(mesh=mesh, mp_policy=MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype),
                   reshard_after_forward=reshard_after_forward)
    if cpu_offload:
        options['offload_policy'] = CPUOffloadPolicy(pin_memory=device.type == 'cuda')
    broadcast_from_rank0(model)
    for unit in units:
        fully_shard(unit, **options)
    fully_shard(model, **options)
    return len(units) + 1
