"""Peak memory of one JetViT forward (or JetViT + DPT depth head), measured in a fresh Python process per model and
input size.

CPU: the process builds the model, runs one warm-up forward (one-time allocations such as oneDNN caches then count
as baseline), resets the peak-RSS mark (``echo 5 > /proc/self/clear_refs``, Linux >= 4.0), records the RSS, runs the
measured forward and reads the new peak (``VmHWM``): the peak *increase* over the resident model (weights included
in ``peak_rss_bytes``). glibc's malloc runs with a fixed ``MALLOC_MMAP_THRESHOLD_`` so that freed tensors go back to
the kernel instead of hiding later allocations. Without a writable ``clear_refs`` the increase is taken against
``ru_maxrss`` (an upper bound). CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus
the memory allocated before (:func:`cuda_forward_memory`; exact in-process too).

    python -m jetvit_mm.benchmark.memory '{"model": {...JetViT kwargs...}, "input_shape": [1, 3, 512, 1024]}'

prints one JSON line (:func:`measure_forward_memory` runs it in a subprocess; ``{"train_step": {...}}``:
:func:`measure_train_step_memory`, the memory planner's check, docs/scale_out.md).
"""
import json
import os
import resource
import subprocess
import sys
from functools import partial
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch

from jetvit_mm.dtypes import to_dtype

from .distill import build_distiller, distill_step

MMAP_THRESHOLD = 128 * 1024


def _status_bytes(field: str) -> int:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f'{field} not in /proc/self/status')


def _reset_peak_rss() -> bool:
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return True
    except OSError:
        return False


def _weights_bytes(model: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))


def build_model(model_kwargs: Dict[str, Any], head: Optional[Dict[str, Any]] = None) -> torch.nn.Module:
    """``JetViT(**model_kwargs)`` (``TokenClusteringJetViT`` when they hold ``clustering``); with ``head`` (DPT
    widths; ``{}`` for the model's preset) a :class:`~jetvit_mm.models.depth_anything.JetViTDepthAnything`."""
    model_kwargs = dict(model_kwargs)
    clustering = model_kwargs.pop('clustering', None)  # the token-clustering baseline (tools/benchmark.py --baseline)
    if head is None:
        from jetvit_mm.models.jetvit import JetViT
        from jetvit_mm.models.token_reduction import TokenClusteringJetViT

        if clustering is None:
            return JetViT(**model_kwargs)
        return TokenClusteringJetViT(clustering=clustering, **model_kwargs)
    from jetvit_mm.models.depth_anything import JetViTDepthAnything
    from jetvit_mm.models.token_reduction import apply_token_clustering

    model = JetViTDepthAnything(**model_kwargs, **head)
    if clustering is not None:
        apply_token_clustering(model.backbone, clustering)
    return model


def forward_memory(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Build the model of ``spec`` (:func:`build_model` of ``spec['model']`` and ``spec.get('head')``) and measure
    the peak memory of one forward (run it in a fresh process)."""
    if spec.get('threads'):
        torch.set_num_threads(int(spec['threads']))
    device = torch.device(spec.get('device', 'cpu'))
    dtype = to_dtype(spec.get('dtype', 'fp32'))
    torch.manual_seed(0)
    model = build_model(spec['model'], spec.get('head')).to(device=device, dtype=dtype).eval()
    x = torch.randn(*spec['input_shape'], device=device, dtype=dtype)
    if device.type == 'cuda':
        return cuda_forward_memory(model, x, int(spec.get('warmup', 1)))
    weights = _weights_bytes(model)
    with torch.inference_mode():
        for _ in range(int(spec.get('warmup', 1))):
            model(x)
        exact = _reset_peak_rss()
        before = _status_bytes('VmRSS')
        out = model(x)
        peak = _status_bytes('VmHWM') if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        del out
    return {'method': 'VmHWM after clear_refs' if exact else 'ru_maxrss (upper bound)',
            'peak_increase_bytes': peak - before, 'peak_rss_bytes': peak, 'rss_before_bytes': before,
            'weights_bytes': weights}


def cuda_forward_memory(model: torch.nn.Module, x: torch.Tensor, warmup: int = 1) -> Dict[str, Any]:
    """Peak extra CUDA memory of one ``model(x)`` (no fresh process needed: the allocator's counters are exact)."""
    device = x.device
    weights = _weights_bytes(model)
    with torch.inference_mode():
        for _ in range(warmup):
            model(x)
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        out = model(x)
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device)
        del out
    return {'method': 'torch.cuda.max_memory_allocated', 'peak_increase_bytes': peak - before,
            'peak_bytes': peak, 'weights_bytes': weights}


def measure_forward_memory(model_kwargs: Dict[str, Any], input_shape: Sequence[int], dtype: str = 'fp32',
                           device: str = 'cpu', threads: int = 0, warmup: int = 1,
                           timeout: Optional[float] = None, head: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """:func:`forward_memory` in a fresh interpreter (so that one model's peak never hides another's)."""
    spec = {'model': model_kwargs, 'input_shape': list(input_shape), 'dtype': dtype, 'device': device,
            'threads': threads, 'warmup': warmup}
    if head is not None:
        spec['head'] = head
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(MMAP_THRESHOLD))
    proc = subprocess.run([sys.executable, '-m', 'jetvit_mm.benchmark.memory', json.dumps(spec)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f'memory probe failed ({proc.returncode}):\n{proc.stderr[-4000:]}')
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build_distill(spec: Dict[str, Any]) -> Tuple[torch.nn.Module, Callable[[torch.Tensor], torch.Tensor]]:
    """The planner's distillation model, ``(model, loss_fn)``: :func:`~jetvit_mm.benchmark.distill.build_distiller` of
    ``spec['model']`` (JetViT kwargs), ``spec['arch']`` and ``spec['checkpointing']``, MSE on the last layer."""
    model = build_distiller(spec['model'], spec['arch'], checkpointing=bool(spec.get('checkpointing')))
    return model, model


def train_step_memory(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Peak RSS of one training step (zero_grad, forward, backward, AdamW) of :func:`build_distill`'s model, after a
    warm-up step, over the RSS before it was built (run it in a fresh process; CPU, fp32)."""
    if spec.get('threads'):
        torch.set_num_threads(int(spec['threads']))
    torch.manual_seed(0)
    x = torch.randn(*spec['input_shape'])
    before = _status_bytes('VmRSS')
    model, loss_fn = build_distill(spec)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)

    step = partial(distill_step, loss_fn, optimizer, x)
    step()  # AdamW states, oneDNN caches: resident from here on
    exact = _reset_peak_rss()
    resident = _status_bytes('VmRSS')
    state = _live_state_bytes(model, optimizer)
    step()
    peak = _status_bytes('VmHWM') if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {'method': 'VmHWM after clear_refs' if exact else 'ru_maxrss (upper bound)',
            'peak_increase_bytes': peak - before, 'rss_before_build_bytes': before,
            'rss_before_step_bytes': resident, 'peak_rss_bytes': peak, 'weights_bytes': _weights_bytes(model),
            'state_bytes': state, 'overhead_bytes': resident - before - state}


def _live_state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor alive between two steps: weights, buffers, gradients and optimizer states (each storage
    once). The RSS growth beyond them is the process's overhead (library caches, allocator arenas, thread stacks),
    which no plan of tensors counts."""
    tensors = list(model.parameters()) + list(model.buffers()) + [p.grad for p in model.parameters()]
    tensors += [t for state in optimizer.state.values() for t in state.values() if torch.is_tensor(t)]
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors if t is not None}
    return sum(storages.values())


def measure_train_step_memory(spec: Dict[str, Any], timeout: Optional[float] = None) -> Dict[str, Any]:
    """:func:`train_step_memory` in a fresh interpreter (glibc mmap threshold fixed as for the forward probe)."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(MMAP_THRESHOLD))
    proc = subprocess.run([sys.executable, '-m', 'jetvit_mm.benchmark.memory', json.dumps({'train_step': spec})],
                          env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f'memory probe failed ({proc.returncode}):\n{proc.stderr[-4000:]}')
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == '__main__':
    _spec = json.loads(sys.argv[1])
    print(json.dumps(train_step_memory(_spec['train_step']) if 'train_step' in _spec else forward_memory(_spec)))
