"""FSDP2 (``torch.distributed.fsdp.fully_shard``) for models that hold JetViTs, in pure torch.

Every transformer block of every JetViT in the model (student supernet and frozen teacher alike) is its own FSDP2
unit; the rest is the root unit. A model too large for one rank: build it inside :func:`meta_parameters`, shard it
with ``shard_model(..., sync=False)``, then :func:`materialize_shards`: a rank holds its shards plus one tensor's
transient, never the whole model.
"""
import contextlib
import copy
import ctypes
import itertools
import mmap
import sys
import zlib
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Shard

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
                reshard_after_forward: bool = True, sync: bool = True) -> int:
    """Sync ``model`` from rank 0 (unless ``sync=False``: a meta-built model), then shard it in place: one FSDP2 unit
    per JetViT block and the root. Returns the number of units."""
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
    if sync:
        broadcast_from_rank0(model)
    for unit in units:
        fully_shard(unit, **options)
    fully_shard(model, **options)
    return len(units) + 1


@contextlib.contextmanager
def meta_parameters() -> Iterator[None]:
    """Build modules with every parameter on the meta device (no storage; their init draws nothing) and their
    buffers real (small, often computed: RoPE periods), which :func:`materialize_shards` keeps."""
    register = nn.Module.register_parameter

    def to_meta(module: nn.Module, name: str, param: Optional[nn.Parameter]) -> None:
        if param is not None and not param.is_meta:
            param = nn.Parameter(param.detach().to('meta'), requires_grad=param.requires_grad)
        register(module, name, param)

    nn.Module.register_parameter = to_meta
    try:
        yield
    finally:
        nn.Module.register_parameter = register


def is_meta(model: nn.Module) -> bool:
    """Whether ``model`` has parameters on the meta device (built in :func:`meta_parameters`, not materialised)."""
    return any(p.is_meta for p in model.parameters())


def own_init_modules(model: nn.Module, names: List[str]) -> Dict[str, nn.Module]:
    """For parameters of meta-built ``model`` that no checkpoint holds: the largest submodules all of whose
    parameters are among ``names``, by qualified name, copied (meta, no storage) so that
    :func:`materialize_shards` can initialise them later, one at a time."""
    missing, out = set(names), {}
    for prefix, module in model.named_modules():
        own = [f'{prefix}.{n}' if prefix else n for n, _ in module.named_parameters()]
        if own and all(n in missing for n in own) and not any(prefix.startswith(p + '.') for p in out):
            out[prefix] = copy.deepcopy(module)
    covered = {f'{p}.{n}' for p, m in out.items() for n, _ in m.named_parameters()}
    if covered != missing:
        raise ValueError(f'meta-device init: parameters without weights outside any module to initialise: '
                         f'{sorted(missing - covered)[:8]}')
    return out


def _reset(module: nn.Module) -> None:
    """The module's own ``reset_parameters``, else its children's (a module's own rule overrides its layers')."""
    if hasattr(module, 'reset_parameters'):
        module.reset_parameters()
        return
    for child in module.children():
        _reset(child)


def initialised_state(modules: Mapping[str, nn.Module]) -> Iterator[Tuple[str, Callable[[], Dict[str, torch.Tensor]]]]:
    """Per module of :func:`own_init_modules`: its qualified name and a function that materialises it on the CPU
    and runs its ``reset_parameters`` with a generator seeded by its name (the same values on every rank; not
    the values the global random stream would give a model built in full)."""
    for prefix, module in modules.items():
        def build(prefix: str = prefix, module: nn.Module = module) -> Dict[str, torch.Tensor]:
            real = copy.deepcopy(module).to_empty(device='cpu')
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(zlib.crc32(prefix.encode()))
                with torch.no_grad():
                    _reset(real)
            return {f'{prefix}.{n}': p.detach() for n, p in real.named_parameters()}
        yield prefix, build


def _local_rows(param: nn.Parameter, full: torch.Tensor, name: str) -> torch.Tensor:
    """This rank's rows of ``full`` for ``param`` (a DTensor sharded on dim 0 as FSDP2 does: torch.chunk)."""
    if tuple(full.shape) != tuple(param.shape):
        raise ValueError(f'{name}: the weights have shape {tuple(full.shape)}, the model {tuple(param.shape)}')
    if not isinstance(param, DTensor):
        return full
    if len(param.placements) != 1 or param.placements[0] != Shard(0):
        raise ValueError(f'{name}: placement {param.placements}; FSDP2 shards on dim 0 (Shard(0))')
    chunks = full.chunk(param.device_mesh.size(), dim=0)
    rank = param.device_mesh.get_local_rank()
    return chunks[rank] if rank < len(chunks) else full[:0]


class _FilePages:
    """Releases the pages of a memory-mapped checkpoint a loaded tensor touched: ``madvise(MADV_DONTNEED)`` on the
    whole pages of its storage in a file mapping (clean pages, re-read if touched again). A no-op off Linux."""
    MADV_DONTNEED = 4

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith('linux') else None
        self.ranges: List[Tuple[int, int]] = []
        if self.libc is not None:
            with open('/proc/self/maps') as f:
                for line in f:
                    fields = line.split()
                    if len(fields) >= 6 and fields[5].startswith('/'):  # file mappings (torch.load(mmap=True))
                        lo, hi = (int(x, 16) for x in fields[0].split('-'))
                        self.ranges.append((lo, hi))

    def release(self, tensor: torch.Tensor) -> None:
        if self.libc is None or tensor.device.type != 'cpu':
            return
        start = tensor.untyped_storage().data_ptr()
        end = start + tensor.untyped_storage().nbytes()
        for lo, hi in self.ranges:
            a, b = max(lo, start), min(hi, end)
            a = -(-a // mmap.PAGESIZE) * mmap.PAGESIZE  # whole pages inside the tensor and the mapping only
            b = b // mmap.PAGESIZE * mmap.PAGESIZE
            if a < b:
                self.libc.madvise(ctypes.c_void_p(a), ctypes.c_size_t(b - a), self.MADV_DONTNEED)


def materialize_shards(model: nn.Module, state: Mapping[str, torch.Tensor],
                       init: Optional[Mapping[str, nn.Module]] = None) -> List[str]:
    """Allocate this rank's shard of every parameter of a model built in :func:`meta_parameters` and sharded with
    ``shard_model(..., sync=False)``, on the group's device, and fill it: from ``state`` (full tensors by the
    model's parameter names, typically memory-mapped checkpoint tensors; only this rank's rows are read), the rest
    from ``init`` (:func:`own_init_modules`, materialised one module at a time). Buffers keep the values they were
    built with. Returns the names initialised rather than loaded."""
    init = dict(init or {})
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    model.to_empty(device=collective_device())
    params = dict(model.named_parameters())
    pages = _FilePages()
    initialised = []
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            buffer.copy_(buffers[name])
        for name, param in params.items():
            if name in state:
                full = state[name]
                local = param.to_local() if isinstance(param, DTensor) else param
                local.copy_(_local_rows(param, full, name))
                pages.release(full)
        for _, build in initialised_state(init):
            for name, full in build().items():
                local = params[name].to_local() if isinstance(params[name], DTensor) else params[name]
                local.copy_(_local_rows(params[name], full, name))
                initialised.append(name)
    unfilled = sorted(set(params) - set(state) - set(initialised))
    if unfilled:
        raise ValueError(f'meta-device init: no weights for {len(unfilled)} parameters, e.g. {unfilled[:8]}; every '
                         'parameter must come from a checkpoint (or be listed in init)')
    return initialised
