"""Feature-distillation losses between lists of student and teacher token features ``[B, N, D]``."""
import contextlib
import inspect
from typing import Any, Callable, ContextManager, Dict, Optional, Sequence

import torch
import torch.nn.functional as F


def mse_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(student, teacher)


def smooth_l1_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    return F.smooth_l1_loss(student, teacher, beta=1.0)


def cosine_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    return 1 - F.cosine_similarity(student, teacher, dim=-1).mean()


def activation_matching_loss(student: torch.Tensor, teacher: torch.Tensor, max_tokens: Optional[int] = 1024,
                             generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """ViT-Linearizer's activation matching: ``1 - <A_t[i], A_s[i]>`` averaged over tokens, ``A[i, j] = cos(f_i,
    f_j)`` with rows L2-normalised; at most ``max_tokens`` tokens (a random subset, the same for both) take part."""
    n = student.shape[1]
    if max_tokens is not None and n > max_tokens:
        keep = torch.randperm(n, generator=generator, device='cpu')[:max_tokens].to(student.device)
        student, teacher = student[:, keep], teacher[:, keep]

    def rows(x: torch.Tensor) -> torch.Tensor:
        x = F.normalize(x.float(), dim=-1)
        return F.normalize(x @ x.transpose(1, 2), dim=-1)

    return (1 - (rows(student) * rows(teacher)).sum(-1)).mean()


LOSSES: Dict[str, Callable[..., torch.Tensor]] = {
    'mse': mse_loss,
    'cosine': cosine_loss,
    'smooth_l1': smooth_l1_loss,
    'activation': activation_matching_loss,
}


def get_loss(name: str, loss_cfg: Optional[Dict[str, Any]] = None) -> Callable[..., torch.Tensor]:
    """The loss function ``name``; ``loss_cfg`` (its keyword options, e.g. ``max_tokens`` of ``'activation'``) is
    checked against its signature."""
    if name not in LOSSES:
        raise ValueError(f'unknown distillation loss {name!r}; valid: {", ".join(LOSSES)}')
    fn = LOSSES[name]
    options = [p for p in list(inspect.signature(fn).parameters)[2:] if p != 'generator']
    unknown = sorted(set(loss_cfg or {}) - set(options))
    if unknown:
        raise TypeError(f'unknown loss_cfg key(s) {unknown} for loss {name!r}; valid: {options or "none"}')
    return fn


def distill_loss(name: str, students: Sequence[torch.Tensor], teachers: Sequence[torch.Tensor],
                 loss_cfg: Optional[Dict[str, Any]] = None) -> torch.Tensor:
    """Mean of ``name`` (with options ``loss_cfg``) over matched feature pairs, one per distilled layer, in fp32 (at
    least) outside autocast, so that the loss of bf16 / fp16 features does not round to 8 mantissa bits."""
    if len(students) != len(teachers) or not students:
        raise ValueError(f'need matching non-empty feature lists, got {len(students)} and {len(teachers)}')
    fn = get_loss(name, loss_cfg)
    with _autocast_off(students[0].device.type):
        return torch.stack([fn(_at_least_fp32(s), _at_least_fp32(t.detach()), **(loss_cfg or {}))
                            for s, t in zip(students, teachers)]).mean()


def _autocast_off(device_type: str) -> ContextManager:
    """Autocast disabled on ``device_type`` if it is on there (the meta device has no autocast)."""
    if device_type in ('cpu', 'cuda', 'xpu') and torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()


def _at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """``x`` upcast to fp32 if it is in a lower precision (bf16 / fp16 features of mixed-precision training)."""
    return x.float() if x.is_floating_point() and torch.finfo(x.dtype).bits < 32 else x
