"""A supernet distillation step (teacher forward, student forward + backward, AdamW step) on the fast mixer paths
against the same step on the torch paths, side by side (issue #30 item 5).

- ``'torch paths'``: every L and W mixer on ``kernel='torch'``, eager.
- ``'fast paths'``: ``kernel='auto'``. On CUDA, eager: L trains through the Triton kernels and their Triton backward,
  W through FlexAttention's backward. On the CPU no eager fast path has a backward (Triton and Flex are GPU paths
  here), so the fast step is the compiled one: the student's ``forward_intermediates`` under torch.compile
  (inductor fuses the torch paths' formulas, forward and backward).

Both students start from the same weights (the frozen teacher's) and take the same images; their losses are
recorded, so a fast step that computed something else shows.
"""
import copy
from typing import Any, Callable, Dict, Optional

import torch

from jetvit_mm.benchmark.distill import build_distiller, distill_step
from jetvit_mm.benchmark.kernel_check import set_kernels_
from jetvit_mm.benchmark.timing import summarize, time_interleaved
from jetvit_mm.distill.distiller import Distiller

VARIANTS = ('torch paths', 'fast paths')


def step_fn(distiller: Distiller, optimizer: torch.optim.Optimizer, images: torch.Tensor,
            losses: list) -> Callable[[], None]:
    """One :func:`~jetvit_mm.benchmark.distill.distill_step` of ``distiller``; each loss is appended to ``losses``."""
    return lambda: losses.append(distill_step(distiller, optimizer, images))


def distill_kernels_benchmark(model_name: str = 'dinov3_vits16', arch: str = 'LWLWLWLWLWLW', size=(224, 224),
                              batch: int = 2, device: str = 'cpu', warmup: int = 2, repeat: int = 5,
                              on_round: Optional[Callable[[int, bool], None]] = None,
                              **model_kwargs: Any) -> Dict[str, Any]:
    """Median / min milliseconds of one distillation step per variant (:data:`VARIANTS`), interleaved, the ratio
    torch / fast, the first losses of each, and which fast path ran (``'eager'`` on CUDA, ``'compiled'`` on the
    CPU)."""
    torch.manual_seed(0)
    dev = torch.device(device)
    base = build_distiller(dict(model_name=model_name, **model_kwargs), arch)
    distillers = {'torch paths': set_kernels_(base, 'torch'), 'fast paths': set_kernels_(copy.deepcopy(base), 'auto')}
    fast_mode = 'eager' if dev.type == 'cuda' else 'compiled'
    if fast_mode == 'compiled':
        student = distillers['fast paths'].student
        student.forward_intermediates = torch.compile(student.forward_intermediates, dynamic=False)
    images = torch.randn(batch, 3, *size, generator=torch.Generator().manual_seed(1)).to(dev)
    losses = {name: [] for name in distillers}
    calls = {}
    for name, distiller in distillers.items():
        distiller.to(dev)
        optimizer = torch.optim.AdamW([p for p in distiller.parameters() if p.requires_grad], lr=1e-5)
        calls[name] = step_fn(distiller, optimizer, images, losses[name])
    samples = time_interleaved(calls, warmup, repeat, dev, on_round=on_round)
    stats = summarize(samples)
    return dict(model=model_name, arch=arch, size=list(size), batch=batch, device=str(dev), fast_mode=fast_mode,
                stats=stats, samples_ms=samples,
                ratio_median=stats['torch paths']['median_ms'] / stats['fast paths']['median_ms'],
                first_losses={name: [float(v) for v in values[:3]] for name, values in losses.items()})
