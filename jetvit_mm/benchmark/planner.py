"""Per-GPU memory plan of one distillation training step (issue #24 item 6): parameters, gradients, optimizer states
and activations, with and without per-block activation checkpointing, and whether it fits a GPU.

Pure core (torch and jetvit_mm.models only). The caller builds the distiller (frozen ``teacher`` + trainable
``student``), preferably on the meta device so that nothing is allocated, and passes it here
(``tools/benchmark.py plan`` reads a config).

What is counted, and the assumptions (bytes per GPU, ``W`` = world size, ``P_t`` trainable and ``P_f`` frozen
parameters, ``U`` the largest FSDP2 unit, ``b`` the bytes of the compute dtype):

- **FSDP2** (``fsdp=True``; :mod:`jetvit_mm.mm.fsdp`: one unit per transformer block of student and teacher, the rest
  in the root unit). Parameters: the fp32 shards ``4 (P_t + P_f) / W`` plus the gathered working set in the compute
  dtype, ``b x (2 U + root)`` (the unit running and the one FSDP2 prefetches; the root unit stays gathered).
  Gradients: fp32 shards ``4 P_t / W`` plus one unit's unsharded gradient before its reduce-scatter,
  ``(b + 4) U`` (compute dtype and its fp32 copy for the fp32 reduction). AdamW: ``8 P_t / W`` (exp_avg and
  exp_avg_sq, fp32, sharded).
- **No FSDP** (a single process, or DDP replicas): parameters ``4 (P_t + P_f)``, gradients ``4 P_t`` (DDP, W > 1:
  ``+ 4 P_t`` for its gradient buckets), AdamW ``8 P_t``; compute in fp32.
- **Activations are measured, not modelled**: one forward of ``loss_fn`` (teacher under no_grad, student with
  autograd) runs under ``torch.autograd.graph.saved_tensors_hooks`` at the real batch and input size, on the meta
  device for real sizes (nothing allocated) or on real tensors. Each saved tensor's storage counts once (views share
  their base; parameters and buffers are not activations). Saved bytes are split into each student block's and the
  rest (embeddings, final norm, the teacher's targets the loss keeps). Peak without checkpointing: everything saved
  + one block's worth again for the gradients of the block being back-propagated. With checkpointing (torch's
  non-reentrant checkpoint per student block): the rest + every block's input + twice the largest block (its
  recomputed internals and their gradients).
- Not counted: the CUDA context, NCCL buffers and allocator fragmentation (``reserve_bytes``, an assumption the
  caller states, is added before the fit check), the data loader's host memory, the teacher's transient
  (no-grad) intermediates.

Validated on the CPU at tiny sizes (single process, fp32) against the measured peak RSS of a real step:
``tests/test_memory_planner.py``.
"""
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Sequence

import torch
from torch import nn

GIB = 1024 ** 3
DTYPE_BYTES = {'float32': 4, 'bfloat16': 2, 'float16': 2}


@dataclass
class ParamCounts:
    trainable: int
    frozen: int
    largest_unit: int
    largest_student_unit: int
    root: int


@dataclass
class Activations:
    """Bytes saved for the backward of one step: outside the student's blocks, per block, and the blocks' inputs."""
    outside: int
    per_block: List[int]
    block_inputs: int

    def peak(self, checkpointing: bool) -> int:
        biggest = max(self.per_block, default=0)
        if checkpointing:
            return self.outside + self.block_inputs + 2 * biggest
        return self.outside + sum(self.per_block) + biggest


def count_params(model: nn.Module, units: Sequence[nn.Module], student_units: Sequence[nn.Module]) -> ParamCounts:
    """Trainable vs frozen parameters of ``model``, its largest shard unit and the parameters outside every unit."""
    def numel(module: nn.Module) -> int:
        return sum(p.numel() for p in module.parameters())

    params = list(model.parameters())
    in_units = sum(numel(u) for u in units)
    return ParamCounts(trainable=sum(p.numel() for p in params if p.requires_grad),
                       frozen=sum(p.numel() for p in params if not p.requires_grad),
                       largest_unit=max((numel(u) for u in units), default=0),
                       largest_student_unit=max((numel(u) for u in student_units), default=0),
                       root=sum(p.numel() for p in params) - in_units)


def _storage_bytes(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return t.numel() * t.element_size()


def measure_activations(model: nn.Module, blocks: Sequence[nn.Module], loss_fn: Callable[[], torch.Tensor]) -> \
        Activations:
    """Run ``loss_fn()`` (a forward that returns the loss) under saved-tensor hooks and count what autograd keeps.

    ``blocks``: the student's transformer blocks (run them without checkpointing here: the checkpointed figure is
    derived from this run, see the module docstring)."""
    static = {id(t) for t in list(model.parameters()) + list(model.buffers())}
    seen: Dict[int, torch.Tensor] = {}
    per_block = [0] * len(blocks)
    inputs = [0] * len(blocks)
    current: List[int] = [-1]

    def pack(t: torch.Tensor) -> torch.Tensor:
        base = t._base if t._base is not None else t
        if id(base) in static or id(t) in static or isinstance(base, nn.Parameter) or id(base) in seen:
            return t
        seen[id(base)] = base  # kept alive so that ids are not reused during the run
        if current[0] >= 0:
            per_block[current[0]] += _storage_bytes(base)
        return t

    def enter(i: int):
        def hook(module, args):
            current[0] = i
            inputs[i] = _storage_bytes(args[0])
        return hook

    def leave(module, args, output):
        current[0] = -1

    handles = [h for i, b in enumerate(blocks)
               for h in (b.register_forward_pre_hook(enter(i)), b.register_forward_hook(leave))]
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = loss_fn()
        del loss
    finally:
        for h in handles:
            h.remove()
    total = sum(_storage_bytes(t) for t in seen.values())
    return Activations(outside=total - sum(per_block), per_block=per_block, block_inputs=sum(inputs))


def plan_memory(params: ParamCounts, activations: Activations, world_size: int, fsdp: bool,
                param_dtype: str = 'float32', gpu_bytes: int = 80 * GIB, reserve_bytes: int = 0) -> Dict[str, object]:
    """The per-GPU split (bytes) and the fit check, with and without activation checkpointing."""
    if world_size < 1:
        raise ValueError(f'world_size must be >= 1, got {world_size}')
    if param_dtype not in DTYPE_BYTES:
        raise ValueError(f'unknown param_dtype {param_dtype!r}; valid: {", ".join(DTYPE_BYTES)}')
    b = DTYPE_BYTES[param_dtype] if fsdp else 4
    total_params = params.trainable + params.frozen
    if fsdp:
        split = {'parameters': 4 * total_params / world_size + b * (2 * params.largest_unit + params.root),
                 'gradients': 4 * params.trainable / world_size + (b + 4) * params.largest_student_unit,
                 'optimizer': 8 * params.trainable / world_size}
    else:
        split = {'parameters': 4 * total_params,
                 'gradients': 4 * params.trainable * (2 if world_size > 1 else 1),
                 'optimizer': 8 * params.trainable}
    split = {k: int(v) for k, v in split.items()}
    state = sum(split.values())
    cases = {}
    for name, ckpt in (('no_checkpointing', False), ('checkpointing', True)):
        act = activations.peak(ckpt)
        total = state + act + reserve_bytes
        cases[name] = {'activations': act, 'total': total, 'fits': total <= gpu_bytes}
    return {'world_size': world_size, 'fsdp': fsdp, 'param_dtype': param_dtype if fsdp else 'float32',
            'gpu_bytes': gpu_bytes, 'reserve_bytes': reserve_bytes, **split, 'state_total': state, **cases,
            'params': asdict(params), 'activations_measured': asdict(activations)}


def format_plan(name: str, plan: Dict[str, object]) -> str:
    """One markdown table row (GiB): name, params, grads, AdamW, activations and total without / with checkpointing,
    fits without / with."""
    g = [plan[k] / GIB for k in ('parameters', 'gradients', 'optimizer')]
    no, yes = plan['no_checkpointing'], plan['checkpointing']
    return (f'| {name} | {g[0]:.2f} | {g[1]:.2f} | {g[2]:.2f} | {no["activations"] / GIB:.2f} | '
            f'{no["total"] / GIB:.2f} | {"yes" if no["fits"] else "no"} | {yes["activations"] / GIB:.2f} | '
            f'{yes["total"] / GIB:.2f} | {"yes" if yes["fits"] else "no"} |')


TABLE_HEADER = ('| config | params | grads | AdamW | act. | total | fits | act. (ckpt) | total (ckpt) | fits (ckpt) |\n'
                '|---|---|---|---|---|---|---|---|---|---|')
