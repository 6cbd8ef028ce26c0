"""Where one forward's time goes: per-block wall times (forward hooks) and torch.profiler's top ops by self time."""
import time
from typing import Dict, List

import torch
from torch import nn


def backbone_of(model: nn.Module) -> nn.Module:
    """The JetViT of a benchmarked model (itself, or a depth model's backbone)."""
    return getattr(model, 'backbone', model)


def block_times(model: nn.Module, x: torch.Tensor, device: torch.device) -> List[float]:
    """Milliseconds of each block in one forward (forward hooks; synchronised on CUDA)."""
    times: List[float] = []
    starts: Dict[int, float] = {}

    def now() -> float:
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        return time.perf_counter()

    def pre(module: nn.Module, args: tuple) -> None:
        starts[id(module)] = now()

    def post(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        times.append((now() - starts[id(module)]) * 1e3)

    handles = [h for b in backbone_of(model).blocks
               for h in (b.register_forward_pre_hook(pre), b.register_forward_hook(post))]
    try:
        with torch.inference_mode():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return times


def profile_model(model: nn.Module, x: torch.Tensor, device: torch.device, top: int = 12) -> List[Dict[str, object]]:
    """Top ops by self time of one forward under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == 'cuda' else [])
    with torch.inference_mode(), profile(activities=activities) as prof:
        model(x)
    attr = 'self_device_time_total' if device.type == 'cuda' else 'self_cpu_time_total'
    events = sorted(prof.key_averages(), key=lambda e: getattr(e, attr), reverse=True)
    total = sum(getattr(e, attr) for e in events)
    return [{'op': e.key, 'self_ms': getattr(e, attr) / 1e3, 'share': getattr(e, attr) / total, 'calls': e.count}
            for e in events[:top]]
