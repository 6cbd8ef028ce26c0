"""Per-GPU memory plan of one distillation training step: parameters, gradients, optimizer states and activations,
with and without per-block activation checkpointing, and whether it fits a GPU (docs/scale_out.md).

The caller builds the distiller, preferably on the meta device. The formulas (bytes per GPU, ``W`` = world size,
``P_t`` trainable and ``P_f`` frozen parameters, ``U`` the largest FSDP2 unit, ``b`` the bytes of the compute dtype):

- **FSDP2** (``fsdp=True``; one unit per transformer block of student and teacher, the rest in the root unit).
  Parameters: fp32 shards ``4 (P_t + P_f) / W`` plus the gathered working set ``b x (2 U + root)`` (the running unit,
  the prefetched one, the root). Gradients: fp32 shards ``4 P_t / W`` plus one unit's unsharded gradient before its
  reduce-scatter, ``(b + 4) U``. AdamW: ``8 P_t / W``.
- **No FSDP** (one process, or DDP replicas): parameters ``4 (P_t + P_f)``, gradients ``4 P_t`` (DDP, W > 1:
  ``+ 4 P_t`` for its buckets), AdamW ``8 P_t``; compute in fp32.
- **Activations are measured**: one forward of ``loss_fn`` under ``torch.autograd.graph.saved_tensors_hooks`` at the
  real batch and size (meta device: attention runs the memory-efficient kernel's meta function, as a GPU would; L
  and W their torch paths). Each saved storage counts once, split into each student block's and the rest. The
  backward's working set: 2 x the largest tensor saved in a block + 2 x the largest block input. Peak without
  checkpointing: everything saved + the working set; with it: the rest + every block's input + the largest block's
  recomputed internals + the working set.
- Not counted: CUDA context, NCCL buffers, fragmentation (``reserve_bytes``, added before the fit check), the data
  loader, the teacher's transient no-grad intermediates, custom kernels' own saved tensors.
"""
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Sequence

import torch
from torch import nn

from jetvit_mm.dtypes import dtype_bytes

GIB = 1024 ** 3


@dataclass
class ParamCounts:
    trainable: int
    frozen: int
    largest_unit: int
    largest_student_unit: int
    root: int


@dataclass
class Activations:
    """Bytes saved for the backward of one step: outside the student's blocks, per block, the blocks' inputs, and the
    largest single tensor saved in a block and the largest block input."""
    outside: int
    per_block: List[int]
    block_inputs: int
    largest_saved: int = 0
    largest_input: int = 0

    def backward_working(self) -> int:
        """While a block back-propagates: the gradients of its largest saved tensor and of the op feeding it, and the
        residual stream's gradient in and out of the block."""
        return 2 * self.largest_saved + 2 * self.largest_input

    def peak(self, checkpointing: bool) -> int:
        biggest = max(self.per_block, default=0)
        if checkpointing:
            return self.outside + self.block_inputs + biggest + self.backward_working()
        return self.outside + sum(self.per_block) + self.backward_working()


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


def _fused_attention_on_meta(original: Callable) -> Callable:
    """``F.scaled_dot_product_attention`` that, on meta tensors, runs the memory-efficient fused kernel: on the meta
    device torch picks the math path, which saves the N x N attention matrix, where a GPU (flash / memory-efficient)
    and the CPU (flash) save only q, k, v, the output and the log-sum-exp (and the mask, as a float bias)."""
    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
        if not query.is_meta or query.dim() != 4 or kwargs:
            return original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                            scale=scale, **kwargs)
        bias = attn_mask
        if bias is not None:
            if bias.dtype == torch.bool:
                bias = torch.zeros(bias.shape, dtype=query.dtype, device=bias.device)
            bias = bias.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
        return torch.ops.aten._scaled_dot_product_efficient_attention(
            query, key, value, bias, True, dropout_p, is_causal, scale=scale)[0]
    return sdpa


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
    largest: List[int] = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        base = t._base if t._base is not None else t
        if id(base) in static or id(t) in static or isinstance(base, nn.Parameter) or id(base) in seen:
            return t
        seen[id(base)] = base  # kept alive so that ids are not reused during the run
        if current[0] >= 0:
            per_block[current[0]] += _storage_bytes(base)
            largest[0] = max(largest[0], _storage_bytes(base))
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
    original = torch.nn.functional.scaled_dot_product_attention
    torch.nn.functional.scaled_dot_product_attention = _fused_attention_on_meta(original)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = loss_fn()
        del loss
    finally:
        torch.nn.functional.scaled_dot_product_attention = original
        for h in handles:
            h.remove()
    total = sum(_storage_bytes(t) for t in seen.values())
    return Activations(outside=total - sum(per_block), per_block=per_block, block_inputs=sum(inputs),
                       largest_saved=largest[0], largest_input=max(inputs, default=0))


def build_load_bytes(params: ParamCounts, world_size: int) -> int:
    """Per-rank memory while the model is built and loaded with ``meta_init``: the fp32 shard of every parameter,
    ``4 (P_t + P_f) / W``, plus one FSDP2 unit in full, ``4 U`` (what loading one tensor or initialising one module
    allocates beside the shards)."""
    if world_size < 1:
        raise ValueError(f'world_size must be >= 1, got {world_size}')
    return int(4 * (params.trainable + params.frozen) / world_size + 4 * params.largest_unit)


def plan_memory(params: ParamCounts, activations: Activations, world_size: int, fsdp: bool,
                param_dtype: str = 'float32', gpu_bytes: int = 80 * GIB, reserve_bytes: int = 0) -> Dict[str, object]:
    """The per-GPU split (bytes) and the fit check, with and without activation checkpointing."""
    if world_size < 1:
        raise ValueError(f'world_size must be >= 1, got {world_size}')
    b = dtype_bytes(param_dtype, 'param_dtype') if fsdp else 4
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
            'build_load_meta': build_load_bytes(params, world_size) if fsdp else None,
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
