"""The fast kernels' self-check: the first time a fast path runs on a device and dtype (the one it computes in, bf16
under autocast), the mixer runs it and the torch path on an input of the caller's shape and compares them (in
training also the gradients). On an exception or a mismatch it warns once, and that device keeps the torch path for
that kernel and dtype for the rest of the process: a GPU nobody here has tried gets correct results, slower.

Not checked: the formulations an outer ``torch.compile`` traces inline; a verdict already reached is honoured there.
"""
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

# (kernel, device, dtype) -> whether the fast path agreed with the torch path (process_state.reset_caches empties)
VERDICTS: Dict[Tuple[str, str, torch.dtype], bool] = {}
# how far a fast path may be from the torch path on the probe, in units of the output's scale: a wrong kernel is off
# by the scale itself; these leave room for the dtype's rounding (bf16's spacing is 2^-7)
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-6, torch.bfloat16: 6e-2, torch.float16: 1e-2}

Pairs = List[Tuple[torch.Tensor, torch.Tensor]]  # (fast path's, torch path's): outputs, then gradients


def mismatch(fast: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype) -> Optional[str]:
    """Why ``fast`` does not stand for ``reference`` at the tolerance of ``dtype``, the dtype the fast path computed
    in (None when it does)."""
    if fast.shape != reference.shape or fast.dtype != reference.dtype:
        return f'output {tuple(fast.shape)} {fast.dtype}, expected {tuple(reference.shape)} {reference.dtype}'
    if not torch.isfinite(fast).all():
        return 'non-finite outputs'
    scale = reference.float().abs().max().item() or 1.0
    error = (fast.float() - reference.float()).abs().max().item()
    tolerance = TOLERANCE.get(dtype, 1e-2)
    if error > tolerance * scale:
        return f'max difference {error:.3g} from the torch path at output scale {scale:.3g} (tolerance {tolerance:g})'
    return None


def _judge(kernels: Sequence[str], device: torch.device, dtype: torch.dtype, probe: Callable[[], Pairs]) -> None:
    """Run ``probe`` once and record a verdict for each of ``kernels`` (the forward's, then the backward's) that has
    none, from its pair of tensors; a probe that raises fails them all."""
    try:
        with torch.no_grad():
            pairs = probe()
        problems = [mismatch(fast, reference, dtype) for fast, reference in pairs]
    except Exception as error:  # any failure of the kernel (compiler, driver, Triton) means: not on this device
        text = str(error).strip()
        problems = [f'{type(error).__name__}: {text.splitlines()[0] if text else ""}'] * len(kernels)
    for kernel, problem in zip(kernels, problems):
        key = (kernel, str(device), dtype)
        if key in VERDICTS:
            continue
        VERDICTS[key] = problem is None
        if problem is not None:
            warnings.warn(f'jetvit_mm: the fast kernel {kernel!r} failed its self-check on {device} ({dtype}): '
                          f'{problem}. The torch path (the reference, slower) runs there instead for the rest of this '
                          'process.', RuntimeWarning, stacklevel=4)


def checked_path(path: str, device: torch.device, dtype: torch.dtype, grad: bool, probe: Callable[[], Pairs]) -> str:
    """``path`` held to its self-check verdicts on ``device`` for ``dtype`` (with ``grad`` the backward's too,
    ``probe()`` judged once); ``'torch'`` where one fails."""
    if path == 'torch':
        return path
    kernels = (path, f'{path} backward') if grad else (path,)
    verdicts = [VERDICTS.get((kernel, str(device), dtype)) for kernel in kernels]
    if None in verdicts and not torch.compiler.is_compiling():  # in a caller's graph: its formulation, traced
        _judge(kernels, device, dtype, probe)
        verdicts = [VERDICTS[(kernel, str(device), dtype)] for kernel in kernels]
    return path if False not in verdicts else 'torch'


def mixer_probe(mixer: torch.nn.Module, attend: Callable[..., torch.Tensor], path: str, like: torch.Tensor,
                grid_size: Tuple[int, int], rope: Optional[torch.Tensor], gradients: bool) -> Pairs:
    """``attend`` on ``path`` and on ``'torch'`` for a random input like ``like`` (``qkv`` from ``mixer.qkv``, under
    the caller's autocast): their outputs, and with ``gradients`` the gradients of ``qkv`` for one fixed random
    output gradient."""
    x = torch.randn(like.shape, generator=torch.Generator().manual_seed(0)).to(like.device, like.dtype)
    qkv = mixer.qkv(x)
    if not gradients:
        return [(attend(qkv, grid_size, rope, path), attend(qkv, grid_size, rope, 'torch'))]
    outputs, grads = [], []
    with torch.enable_grad():
        for run in (path, 'torch'):
            leaf = qkv.detach().requires_grad_()
            out = attend(leaf, grid_size, rope, run)
            out_grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out)
            grads.append(torch.autograd.grad(out, leaf, out_grad)[0])
            outputs.append(out.detach())
    return [tuple(outputs), tuple(grads)]


def paths_run(mixer: torch.nn.Module) -> List[Tuple[str, bool]]:
    """``(path, grad)`` for every path ``mixer`` resolved: the kernel it chose, or ``'torch'`` where a self-check
    verdict sent it back. What every report of the path that ran reads."""
    ran = []
    for key, path in getattr(mixer, '_kernel_paths', {}).items():
        device, dtype, grad = str(key[1]), key[2], key[3]
        checks = [path] + ([f'{path} backward'] if grad else [])
        fell_back = any(VERDICTS.get((check, device, dtype)) is False for check in checks)
        ran.append(('torch' if path != 'torch' and fell_back else path, grad))
    return ran
