"""One switch per mixer: the names a user picks (``linear_cfg.kernel``, ``window_kernel``) and the path that runs.

- ``'torch'``: the reference (eager PyTorch, the mixer's own ``forward`` math).
- ``'compile'``: the mixer core as one pure function, compiled by torch.compile once per shape (CPU and CUDA).
- ``'triton'`` (L only): fused Triton kernels, one pass over K/V and one over Q (CUDA; CPU under TRITON_INTERPRET=1).
- ``'flex'`` (W only): FlexAttention with a window + global-prefix block mask (compiled; fast on CUDA).
- ``'auto'`` (default): the fastest path for the device and dtype, the torch path where the others are absent.

Which path trains, and what runs inside a user's torch.compile: docs/benchmarks.md; the rules are the two
``select_*_kernel`` functions below.
"""
from typing import Callable, Dict, Hashable, Tuple

import torch
from torch.utils._python_dispatch import is_in_torch_dispatch_mode

from ...tracing import exporting
from .availability import compile_available, flex_available, triton_available

LINEAR_KERNELS = ('auto', 'torch', 'compile', 'triton')
WINDOW_KERNELS = ('auto', 'torch', 'compile', 'flex')
# below this many elements in the mixer's input the compiled path's first call (compiling) outweighs what it saves:
# 'auto' on the CPU compiles from here on (a 512x1024 image with ViT-B: 2053 x 768 = 1.6 M)
AUTO_COMPILE_MIN_ELEMENTS = 2 ** 20
_NEEDS = {'compile': 'torch.compile (a C++ compiler on the CPU, Triton on CUDA)',
          'triton': 'Triton and a CUDA device (or TRITON_INTERPRET=1 for CPU tensors)',
          'flex': 'FlexAttention and torch.compile'}
_AVAILABLE = {'compile': compile_available, 'triton': triton_available, 'flex': flex_available}


def check_kernel(name: str, valid: Tuple[str, ...], option: str) -> str:
    """``name`` if it is one of ``valid``; ValueError naming the option and the valid names otherwise."""
    if name not in valid:
        raise ValueError(f'unknown {option} {name!r}; valid: {", ".join(repr(v) for v in valid)}')
    return name


def available_kernels(valid: Tuple[str, ...], device_type: str) -> Tuple[str, ...]:
    """The named paths of ``valid`` that can run on ``device_type`` here (``'torch'`` always)."""
    return tuple(k for k in valid if k == 'torch' or (k in _AVAILABLE and _AVAILABLE[k](device_type)))


def _named(requested: str, valid: Tuple[str, ...], option: str, device: torch.device) -> str:
    if requested != 'torch' and not _AVAILABLE[requested](device.type):
        have = ', '.join(repr(k) for k in available_kernels(valid, device.type))
        raise RuntimeError(f'{option}={requested!r} is not available for {device.type} tensors here: it needs '
                           f'{_NEEDS[requested]}; available on {device.type}: {have} (or \'auto\')')
    return requested


def _auto_compiles(device: torch.device, numel: int) -> bool:
    return device.type == 'cpu' and numel >= AUTO_COMPILE_MIN_ELEMENTS and compile_available('cpu')


def select_linear_kernel(requested: str, device: torch.device, numel: int, needs_grad: bool,
                         trainable_triton: bool = True) -> str:
    """The L path to run: ``'torch'``, ``'fused'`` (the pure formulation, traced by an outer torch.compile),
    ``'compile'`` or ``'triton'`` (also inside an outer torch.compile: the custom op). ``torch.export`` (ONNX)
    traces the reference path. With ``needs_grad`` (autograd records) only ``'triton'`` (where ``trainable_triton``:
    ReLU features) or the torch path run."""
    if exporting():
        return 'torch'
    if torch.compiler.is_compiling():
        if requested == 'torch' or needs_grad:
            return 'torch'
        # the Triton kernels as the custom op the caller's graph keeps (CUDA: inductor's CUDA backend is Triton)
        return 'triton' if requested == 'triton' or (requested == 'auto' and device.type == 'cuda') else 'fused'
    if is_in_torch_dispatch_mode():
        return 'torch'
    if needs_grad:  # only the Triton path has a backward
        trains = trainable_triton and triton_available(device.type)
        if trains and (requested == 'triton' or (requested == 'auto' and device.type == 'cuda')):
            return 'triton'
        return 'torch'
    if requested == 'auto':
        if device.type == 'cuda' and triton_available('cuda'):
            return 'triton'
        return 'compile' if _auto_compiles(device, numel) else 'torch'
    return _named(requested, LINEAR_KERNELS, 'linear_cfg.kernel', device)


def select_window_kernel(requested: str, device: torch.device, numel: int, needs_grad: bool,
                         dropout: bool = False) -> str:
    """The W path to run: ``'torch'``, ``'compile'`` or ``'flex'``; inside an outer torch.compile the chosen
    formulation is traced inline (``'auto'``: FlexAttention on CUDA, the padded-key windows elsewhere);
    ``torch.export`` (ONNX) traces the reference path. With ``needs_grad`` only ``'flex'`` on CUDA or the torch path
    run; with attention ``dropout`` (the fast paths have none) the torch path."""
    if exporting():
        return 'torch'
    if torch.compiler.is_compiling():
        if requested == 'torch' or needs_grad or dropout:
            return 'torch'
        return 'flex' if requested == 'flex' or (requested == 'auto' and device.type == 'cuda') else 'compile'
    if dropout or is_in_torch_dispatch_mode():
        return 'torch'
    if needs_grad:  # FlexAttention's backward: CUDA only
        flex_trains = device.type == 'cuda' and flex_available('cuda')
        return 'flex' if flex_trains and requested in ('auto', 'flex') else 'torch'
    if requested == 'auto':
        if device.type == 'cuda' and flex_available('cuda'):
            return 'flex'
        return 'compile' if _auto_compiles(device, numel) else 'torch'
    return _named(requested, WINDOW_KERNELS, 'window_kernel', device)


def resolve_once(cache: Dict[Hashable, str], key: Hashable, resolve: Callable[[], str]) -> str:
    """``cache[key]``, filled by ``resolve()`` on first use, so that a forward reads one dict entry. Not cached while
    torch.compile or torch.export traces, nor under a tensor-dispatch mode (the choice there differs)."""
    if torch.compiler.is_compiling() or exporting() or is_in_torch_dispatch_mode():
        return resolve()
    path = cache.get(key)
    if path is None:
        path = cache[key] = resolve()
    return path
