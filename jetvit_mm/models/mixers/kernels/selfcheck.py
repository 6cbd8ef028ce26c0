"""The fast kernels' self-check: the first time a fast path runs on a device and dtype, the mixer runs it and the torch
path on one small input and compares them. On an exception or a mismatch it warns once, naming the kernel, the device
and the error, and that device keeps the torch path for that kernel and dtype for the rest of the process. A user on
a GPU nobody here has tried (an older card, another Triton) gets correct results, slower.

Not checked: the formulations an outer ``torch.compile`` traces inline (they run inside the caller's graph); a
verdict already reached is still honoured there.
"""
import warnings
from typing import Callable, Dict, Optional, Tuple

import torch

# (kernel, device, dtype) -> whether the fast path agreed with the torch path (process_state.reset_caches empties)
VERDICTS: Dict[Tuple[str, str, torch.dtype], bool] = {}
# how far a fast path may be from the torch path on the probe, in units of the output's scale: a wrong kernel is off
# by the scale itself; these leave room for the dtype's rounding (bf16's spacing is 2^-7)
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-6, torch.bfloat16: 6e-2, torch.float16: 1e-2}

Probe = Callable[[], Tuple[torch.Tensor, torch.Tensor]]


def mismatch(fast: torch.Tensor, reference: torch.Tensor) -> Optional[str]:
    """Why ``fast`` does not stand for ``reference`` (None when it does)."""
    if fast.shape != reference.shape or fast.dtype != reference.dtype:
        return f'output {tuple(fast.shape)} {fast.dtype}, expected {tuple(reference.shape)} {reference.dtype}'
    if not torch.isfinite(fast).all():
        return 'non-finite outputs'
    scale = reference.float().abs().max().item() or 1.0
    error = (fast.float() - reference.float()).abs().max().item()
    tolerance = TOLERANCE.get(reference.dtype, 1e-2)
    if error > tolerance * scale:
        return f'max difference {error:.3g} from the torch path at output scale {scale:.3g} (tolerance {tolerance:g})'
    return None


def fast_path_ok(kernel: str, device: torch.device, dtype: torch.dtype, probe: Probe) -> bool:
    """Whether ``kernel`` may run on ``device`` for ``dtype``: decided once, by ``probe`` (which returns the fast and
    the torch path's outputs on a small input), and remembered for the process."""
    key = (kernel, str(device), dtype)
    verdict = VERDICTS.get(key)
    if verdict is not None:
        return verdict
    if torch.compiler.is_compiling():
        return True  # the caller's graph traces the formulation itself; nothing runs here
    try:
        with torch.no_grad():
            problem = mismatch(*probe())
    except Exception as error:  # any failure of the kernel (compiler, driver, Triton) means: not on this device
        problem = f'{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ""}'
    VERDICTS[key] = problem is None
    if problem is not None:
        warnings.warn(f'jetvit_mm: the fast kernel {kernel!r} failed its self-check on {device} ({dtype}): '
                      f'{problem}. The torch path (the reference, slower) runs there instead for the rest of this '
                      'process.', RuntimeWarning, stacklevel=3)
    return problem is None


def mixer_probe(mixer: torch.nn.Module, attend: Callable[..., torch.Tensor], path: str, like: torch.Tensor,
                grid_size: Tuple[int, int], most: Tuple[int, int], rope: Optional[torch.Tensor],
                gradients: bool) -> Tuple[torch.Tensor, ...]:
    """The probe of a mixer's fast path: ``attend(qkv, grid, rope, path)`` and ``attend(qkv, grid, rope, 'torch')``
    on one small input like ``like`` (a grid of ``grid_size`` cut to ``most``, ``qkv`` from ``mixer.qkv``): their
    outputs, or with ``gradients`` the gradients of ``qkv`` for one fixed random output gradient (autograd enabled
    whatever the caller's mode)."""
    grid = (min(grid_size[0], most[0]), min(grid_size[1], most[1]))
    x = torch.randn(2, mixer.num_prefix_tokens + grid[0] * grid[1], like.shape[-1],
                    generator=torch.Generator().manual_seed(0)).to(like.device, like.dtype)
    qkv, rope = mixer.qkv(x), None if rope is None else rope[:grid[0] * grid[1]]
    if not gradients:
        return attend(qkv, grid, rope, path), attend(qkv, grid, rope, 'torch')
    grads = []
    with torch.enable_grad():
        for run in (path, 'torch'):
            leaf = qkv.detach().requires_grad_()
            out = attend(leaf, grid, rope, run)
            out_grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out)
            grads.append(torch.autograd.grad(out, leaf, out_grad)[0])
    return grads[0], grads[1]


def checked_path(path: str, device: torch.device, dtype: torch.dtype, grad: bool,
                 outputs: Callable[[bool], Tuple[torch.Tensor, torch.Tensor]]) -> str:
    """``path`` held to its self-check verdicts on ``device`` and ``dtype`` (:func:`fast_path_ok`): the forward's, and
    with ``grad`` the backward's (``outputs(gradients)``: the path's and the torch path's outputs, or gradients);
    ``'torch'`` where one fails."""
    if path == 'torch':
        return path
    if not fast_path_ok(path, device, dtype, lambda: outputs(False)):
        return 'torch'
    if grad and not fast_path_ok(f'{path} backward', device, dtype, lambda: outputs(True)):
        return 'torch'
    return path
