"""Per-GPU memory plan of one distillation training step (issue #24 item 6): parameters, gradients, optimizer states
and activations, with and without per-block activation checkpointing, and whether it fits a GPU.

Pure core (torch and jetvit_mm.models only). The caller builds the distiller (frozen ``teacher`` + trainable
``student``), preferably on the meta device so that nothing is allocated, and passes it here
(``tools/benchmark.py plan`` reads a config).

What is counted, and the assumptions (bytes per GPU, ``W`` = world size, ``P_t`` trainable and ``P_f`` frozen
parameters, ``U`` the largest FSDP2 unit, ``b`` the bytes of the compute dtype):

- **FSDP2** (``fsdp=True``; :mod:`jetvit_mm.mm.engine.fsdp`: one unit per transformer block of student and teacher,
  the rest in the root unit). Parameters: the fp32 shards ``4 (P_t + P_f) / W`` plus the gathered working set in the
  compute dtype, ``b x (2 U + root)`` (the unit running and the one FSDP2 prefetches; the root unit stays gathered).
  Gradients: fp32 shards ``4 P_t / W`` plus one unit's unsharded gradient before its reduce-scatter,
  ``(b + 4) U`` (compute dtype and its fp32 copy for the fp32 reduction). AdamW: ``8 P_t / W`` (exp_avg and
  exp_avg_sq, fp32, sharded).
- **No FSDP** (a single process, or DDP replicas): parameters ``4 (P_t + P_f)``, gradients ``4 P_t`` (DDP, W > 1:
  ``+ 4 P_t`` for its gradient buckets), AdamW ``8 P_t``; compute in fp32.
- **Activations are measured, not modelled**: one forward of ``loss_fn`` (teacher under no_grad, student with
  autograd) runs under ``torch.autograd.graph.saved_tensors_hooks`` at the real batch and input size, on the meta
  device for real sizes (nothing allocated) or on real tensors. On meta, attention runs the memory-efficient fused
  kernel's meta function (what a GPU runs; torch's meta dispatch would take the math path and save N x N
  matrices); the L and W mixers run their torch reference paths. Each saved tensor's storage counts once (views
  share their base; parameters and buffers are not activations). Saved bytes are split into each student block's and the
  rest (embeddings, final norm, the teacher's targets the loss keeps). The backward's working set while a block
  back-propagates: twice the largest tensor saved in a block plus twice the largest block input (gradients in
  flight: of that tensor and of the op feeding it, of the residual stream in and out). Peak without checkpointing:
  everything saved + the working set. With checkpointing (torch's non-reentrant checkpoint per student block): the
  rest + every block's input + the largest block's recomputed internals + the working set.
- Not counted: the CUDA context, NCCL buffers and allocator fragmentation (``reserve_bytes``, an assumption the
  caller states, is added before the fit check), the data loader's host memory, the teacher's transient
  (no-grad) intermediates, custom GPU kernels' own saved tensors.
- The backward working-set rule was revised once after the first validation shape (one more whole block
  over-estimated it by 9-14 %); the second shape was measured after the revision (docs/scale_out.md).

Validated on the CPU at tiny sizes (single process, fp32) against the measured peak RSS of a real step:
``tests/test_memory_planner.py``.
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
    """Per-rank memory while the model is built and loaded with meta-device construction (``FSDP2Wrapper``'s
    ``meta_init``, :func:`~jetvit_mm.distill.fsdp2.materialize_shards`): the fp32 shard of every parameter,
    ``4 (P_t + P_f) / W``, plus one FSDP2 unit in full, ``4 U`` (the bound on what loading one tensor, or
    initialising one module no checkpoint holds, allocates beside the shards). Checked against the measured peak RSS
    of 2 gloo ranks in ``tests/test_meta_init.py``."""
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
