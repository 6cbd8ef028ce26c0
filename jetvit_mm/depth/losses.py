"""Depth Anything's affine-invariant disparity loss (pure torch): the scale-and-shift-invariant term and MiDaS's
multi-scale gradient matching."""
from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

__all__ = ['ScaleShiftInvariantLoss', 'check_ignore_top', 'gradient_matching_loss', 'ssi_loss']


def _normalise_median(x: Tensor, valid: Tensor, eps: float = 1e-6) -> Tensor:
    """``(x - median) / mean|x - median|`` over the valid pixels of one image (Depth Anything's ssi normalisation)."""
    values = x[valid]
    median = values.median()
    return (x - median) / ((values - median).abs().mean() + eps)


def check_ignore_top(ignore_top: float) -> None:
    if not 0. <= ignore_top < 1.:
        raise ValueError(f'ignore_top is a fraction of the pixels in [0, 1), got {ignore_top}')


def ssi_loss(pred: Tensor, target: Tensor, valid: Tensor, ignore_top: float = 0.
             ) -> Tuple[Tensor, List[Tensor], Tensor]:
    """``L_ssi`` of :class:`ScaleShiftInvariantLoss` on ``[B, H, W]`` disparities, with the per-image residual maps
    (zero where not counted) and the counted pixels."""
    check_ignore_top(ignore_top)
    losses, residuals, counted = [], [], []
    for p, t, m in zip(pred, target, valid):
        if not m.any():
            residuals.append(torch.zeros_like(p))
            counted.append(m)
            continue
        residual = (_normalise_median(p, m) - _normalise_median(t, m)) * m
        if ignore_top:
            error = residual.detach().abs()
            limit = torch.quantile(error[m].float(), 1. - ignore_top)
            m = m & (error <= limit.to(error.dtype))
            residual = residual * m
        losses.append(residual.abs().sum() / m.sum())
        residuals.append(residual)
        counted.append(m)
    loss = torch.stack(losses).mean() if losses else pred.sum() * 0.
    return loss, residuals, torch.stack(counted)


def gradient_matching_loss(residuals: Sequence[Tensor], valid: Tensor, scales: int = 4) -> Tensor:
    """MiDaS's multi-scale gradient matching of the aligned residual (sum over scales of masked |grad|)."""
    residual = torch.stack(list(residuals))
    total = residual.sum() * 0.
    for k in range(scales):
        step = 2 ** k
        r, m = residual[:, ::step, ::step], valid[:, ::step, ::step].to(residual.dtype)
        grad_x = (r[:, :, 1:] - r[:, :, :-1]).abs() * m[:, :, 1:] * m[:, :, :-1]
        grad_y = (r[:, 1:] - r[:, :-1]).abs() * m[:, 1:] * m[:, :-1]
        total = total + (grad_x.sum() + grad_y.sum()) / m.sum().clamp(min=1.)
    return total


class ScaleShiftInvariantLoss(nn.Module):
    """Depth Anything's disparity loss: ``loss_weight * (L_ssi + gradient_weight * L_gm)``.

    ``L_ssi``: per image, both maps normalised by their median and mean absolute deviation over the valid pixels,
    then the mean absolute difference (Depth Anything V1, eq. 1). ``L_gm``: MiDaS's gradient matching on that
    residual over ``scales`` scales; DepthAnythingV2 weights ``L_ssi : L_gm`` as 1 : 2 (``gradient_weight=2``).
    ``ignore_top``: per image, the fraction of valid pixels with the largest residual that neither term counts
    (DepthAnythingV2 uses 0.1 on pseudo-labelled images). Inputs are disparities ``[B, 1, H, W]`` or ``[B, H, W]``;
    ``valid`` marks the supervised pixels.
    """

    def __init__(self, loss_weight: float = 1.0, gradient_weight: float = 0.0, scales: int = 4,
                 ignore_top: float = 0., loss_name: str = 'loss_ssi') -> None:
        super().__init__()
        check_ignore_top(ignore_top)  # at build time, not at the first step
        self.loss_weight, self.gradient_weight, self.scales = loss_weight, gradient_weight, scales
        self.ignore_top = ignore_top
        self._loss_name = loss_name

    @property
    def loss_name(self) -> str:
        return self._loss_name

    def forward(self, pred: Tensor, target: Tensor, valid: Optional[Tensor] = None) -> Tensor:
        if pred.dim() == 4:
            pred, target = pred[:, 0], target[:, 0]
            valid = valid[:, 0] if valid is not None and valid.dim() == 4 else valid
        if pred.shape != target.shape:
            raise ValueError(f'prediction {tuple(pred.shape)} and target {tuple(target.shape)} differ')
        valid = torch.ones_like(target, dtype=torch.bool) if valid is None else valid.bool()
        loss, residuals, counted = ssi_loss(pred, target, valid, self.ignore_top)
        if self.gradient_weight:
            loss = loss + self.gradient_weight * gradient_matching_loss(residuals, counted, self.scales)
        return self.loss_weight * loss
