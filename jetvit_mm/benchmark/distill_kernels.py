"""A supernet distillation step (teacher forward, student forward + backward, AdamW step) on the fast mixer paths
against the same step on the torch paths, side by side, per arch.

- ``'<arch> torch'``: every L and W mixer on ``kernel='torch'``, eager.
- ``'<arch> fast'``: ``kernel='auto'``. On CUDA, eager: L trains through its Triton backward, W through
  FlexAttention's. On the CPU no eager fast path has a backward, so by default (``fast_mode='auto'``) the fast step
  is the student's ``forward_intermediates`` under torch.compile (inductor fuses the torch paths' formulas, forward
  and backward); ``fast_mode='eager'`` / ``'compiled'`` force either.

Several archs are timed in one interleaved run, so a slowdown can be put down to L or to W. ``dtype='bf16'``: each
forward under ``torch.autocast(bfloat16)``. Both students of an arch start alike; their losses and each fast
student's resolved mixer paths are recorded, so a fast step that computed or ran something else shows.
"""
import contextlib
import copy
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch

from jetvit_mm.benchmark.archs import DISTILL_KERNEL_ARCHS, resolve_arch
from jetvit_mm.benchmark.distill import build_distiller
from jetvit_mm.benchmark.kernel_check import mixer_paths, set_kernels_
from jetvit_mm.benchmark.timing import summarize, time_interleaved
from jetvit_mm.distill.distiller import Distiller
from jetvit_mm.models.teachers import teacher_depth

VARIANTS = ('torch', 'fast')
DTYPES = {'fp32': None, 'bf16': torch.bfloat16}
FAST_MODES = ('auto', 'eager', 'compiled')


def _check(name: str, value: str, valid: Sequence[str]) -> str:
    if value not in valid:
        raise ValueError(f'unknown {name} {value!r}; valid: {", ".join(repr(v) for v in valid)}')
    return value


def step_fn(distiller: Distiller, optimizer: torch.optim.Optimizer, images: torch.Tensor, losses: list,
            autocast: Optional[torch.dtype] = None) -> Callable[[], None]:
    """One distillation step of ``distiller`` (zero_grad, loss, backward, AdamW), the loss computed under
    ``torch.autocast(autocast)`` unless None; each loss is appended to ``losses``."""
    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with (torch.autocast(images.device.type, dtype=autocast) if autocast else contextlib.nullcontext()):
            loss = distiller(images)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return step


def resolved_paths(model: torch.nn.Module) -> Dict[str, List[str]]:
    """The paths the L and W mixers of ``model`` ran with grad enabled, per mixer kind, the self-check verdicts read
    (empty where none was cached, e.g. inside a compiled graph)."""
    paths = {'L': set(), 'W': set()}
    for letter, path, grad in mixer_paths(model):
        if grad:
            paths[letter].add(path)
    return {kind: sorted(found) for kind, found in paths.items()}


def _students(model_name: str, archs: Sequence[str], fast_mode: str, model_kwargs: Dict[str, Any]
              ) -> Dict[str, Dict[str, Distiller]]:
    """Per arch (resolved from its shortcut), the distiller on the torch paths and a copy on 'auto' (its student's
    ``forward_intermediates`` compiled in ``'compiled'`` mode)."""
    depth = teacher_depth(model_name) if model_kwargs.get('depth') is None else int(model_kwargs['depth'])
    built = {}
    for arch in [resolve_arch(name, depth) for name in archs]:  # every name checked before anything is built
        base = build_distiller(dict(model_name=model_name, **model_kwargs), arch)
        fast = set_kernels_(copy.deepcopy(base), 'auto')
        if fast_mode == 'compiled':
            fast.student.forward_intermediates = torch.compile(fast.student.forward_intermediates, dynamic=False)
        built[arch] = {'torch': set_kernels_(base, 'torch'), 'fast': fast}
    return built


def distill_kernels_benchmark(model_name: str = 'dinov3_vits16',
                              archs: Union[str, Sequence[str]] = DISTILL_KERNEL_ARCHS, size=(224, 224),
                              batch: int = 2, device: str = 'cpu', warmup: int = 2, repeat: int = 5,
                              on_round: Optional[Callable[[int, bool], None]] = None, dtype: str = 'fp32',
                              fast_mode: str = 'auto', **model_kwargs: Any) -> Dict[str, Any]:
    """Median / min milliseconds of one distillation step per arch and variant (``'<arch> torch'``,
    ``'<arch> fast'``), all interleaved in one run, each arch's ratio torch / fast, the first losses of each, and the
    paths the fast students' mixers resolved; ``fast_mode`` ``'auto'``: eager on CUDA, compiled on the CPU."""
    _check('dtype', dtype, tuple(DTYPES))
    _check('fast_mode', fast_mode, FAST_MODES)
    archs = [archs] if isinstance(archs, str) else list(archs)
    torch.manual_seed(0)
    dev = torch.device(device)
    if fast_mode == 'auto':
        fast_mode = 'eager' if dev.type == 'cuda' else 'compiled'
    built = _students(model_name, archs, fast_mode, model_kwargs)
    images = torch.randn(batch, 3, *size, generator=torch.Generator().manual_seed(1)).to(dev)
    losses, calls = {}, {}
    for arch, pair in built.items():
        for variant, distiller in pair.items():
            distiller.to(dev)
            optimizer = torch.optim.AdamW([p for p in distiller.parameters() if p.requires_grad], lr=1e-5)
            name = f'{arch} {variant}'
            losses[name] = []
            calls[name] = step_fn(distiller, optimizer, images, losses[name], DTYPES[dtype])
    samples = time_interleaved(calls, warmup, repeat, dev, on_round=on_round)
    stats = summarize(samples)
    ratios = {arch: stats[f'{arch} torch']['median_ms'] / stats[f'{arch} fast']['median_ms'] for arch in built}
    return dict(model=model_name, archs=list(built), size=list(size), batch=batch, device=str(dev), dtype=dtype,
                autocast=dtype != 'fp32', fast_mode=fast_mode, stats=stats, samples_ms=samples, ratio_median=ratios,
                first_losses={name: [float(v) for v in values[:3]] for name, values in losses.items()},
                fast_paths={arch: resolved_paths(pair['fast'].student) for arch, pair in built.items()})
