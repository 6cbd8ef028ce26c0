"""Feature distillation as one pure-torch module: a frozen teacher, a student, the layers matched and the loss."""
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import nn

from .losses import distill_loss, get_loss


class Distiller(nn.Module):
    """``forward(images)`` is the distillation loss of ``student`` against ``teacher`` at ``indices`` (features after
    the final norm, tokens last), the teacher run without grad. Both are JetViTs (or anything with the same
    ``forward_intermediates``); the module holds both, so it can be wrapped (DDP, FSDP2) as one model."""

    def __init__(self, teacher: nn.Module, student: nn.Module, indices: Sequence[int] = (-1, ), loss: str = 'mse',
                 loss_cfg: Optional[Dict[str, Any]] = None, loss_weight: float = 1.0) -> None:
        super().__init__()
        get_loss(loss, loss_cfg)  # a bad name or option fails here, not at the first step
        self.teacher, self.student = teacher, student
        self.indices = list(indices)
        self.loss_name, self.loss_cfg, self.loss_weight = loss, dict(loss_cfg or {}), loss_weight

    def features(self, model: nn.Module, images: torch.Tensor) -> List[torch.Tensor]:
        return model.forward_intermediates(images, self.indices, norm=True, output_fmt='NLC')

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            targets = self.features(self.teacher, images)
        return self.loss_weight * distill_loss(self.loss_name, self.features(self.student, images), targets,
                                               self.loss_cfg)
