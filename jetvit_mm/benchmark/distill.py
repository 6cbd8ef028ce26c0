"""The distillation step the benchmark times and the memory planner measures: the pure
:class:`~jetvit_mm.distill.distiller.Distiller` on a frozen JetViT teacher and a student that starts from the
teacher's weights, and one training step of it (zero_grad, loss, backward, optimizer step)."""
from typing import Any, Dict, Sequence

import torch

from jetvit_mm.distill.distiller import Distiller


def build_distiller(model_kwargs: Dict[str, Any], arch: str, supernet: bool = True, checkpointing: bool = False,
                    indices: Sequence[int] = (-1, ), loss: str = 'mse') -> Distiller:
    """A :class:`Distiller` of ``JetViT(frozen=True, **model_kwargs)`` into a student with the same kwargs: a
    ``JetViTSupernet`` over the letters of ``arch`` with its path set to ``arch`` (``supernet``), else a fixed-arch
    ``JetViT(arch=arch)``; the student takes the teacher's weights (not on the meta device: nothing to copy),
    per-block activation checkpointing if ``checkpointing``. Returned in train mode (the teacher stays in eval)."""
    from jetvit_mm.models.checkpoint import apply_checkpoint
    from jetvit_mm.models.jetvit import JetViT
    from jetvit_mm.models.supernet import JetViTSupernet

    teacher = JetViT(frozen=True, **model_kwargs)
    if supernet:
        student = JetViTSupernet(search_space=''.join(sorted(set(arch))), **model_kwargs)
    else:
        student = JetViT(arch=arch, **model_kwargs)
    if student.depth != len(arch):
        raise ValueError(f'arch {arch!r} has {len(arch)} letters, the model has {student.depth} layers')
    if not next(teacher.parameters()).is_meta:
        apply_checkpoint(student, teacher.state_dict(), source='teacher weights')
    if supernet:
        student.set_arch(arch)
    student.set_grad_checkpointing(checkpointing)
    return Distiller(teacher, student, indices=indices, loss=loss).train()


def distill_step(distiller: torch.nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor) -> torch.Tensor:
    """One training step of ``distiller`` (a :class:`Distiller`, or anything whose call on ``images`` is the loss):
    zero_grad, loss, backward, ``optimizer.step()``. Returns the loss (detached)."""
    optimizer.zero_grad(set_to_none=True)
    loss = distiller(images)
    loss.backward()
    optimizer.step()
    return loss.detach()
