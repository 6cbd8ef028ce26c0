"""Zero-shot relative-depth scores (pure torch): the per-image scale/shift fit, AbsRel / delta1 under the
DepthAnythingV2 / MiDaS protocol, and DA-2K pair accuracy."""
import math
from typing import Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

__all__ = ['SPACES', 'affine_invariant_errors', 'da2k_pair_counts', 'fit_scale_shift']


def fit_scale_shift(pred: Tensor, target: Tensor) -> Tuple[float, float]:
    """Least-squares ``(s, t)`` minimising ``sum (s * pred + t - target)^2`` over 1-D tensors (in float64)."""
    p, g = pred.double(), target.double()
    p_mean, g_mean = p.mean(), g.mean()
    var = ((p - p_mean) ** 2).mean()
    if var <= 0:  # a constant prediction: only the shift can be fitted
        return 0., float(g_mean)
    scale = ((p - p_mean) * (g - g_mean)).mean() / var
    return float(scale), float(g_mean - scale * p_mean)


SPACES = ('depth', 'disparity')


def affine_invariant_errors(pred_disparity: Tensor, gt_depth: Tensor, min_depth: float = 1e-3,
                            max_depth: Optional[float] = None, min_disparity: float = 1e-3, space: str = 'depth'
                            ) -> Optional[Tuple[float, float]]:
    """``(AbsRel, delta1)`` of one image under the zero-shot relative-depth protocol; None without valid pixels.

    Valid pixels: finite GT depth in ``(min_depth, max_depth]`` (the ground truth alone decides). GT depth ->
    disparity; least-squares scale and shift of the predicted disparity to it; aligned disparity clipped at
    ``>= min_disparity``; inverted; clipped to ``[min_depth, max_depth]``; then ``AbsRel = mean |d - gt| / gt`` and
    ``delta1 = mean(max(d/gt, gt/d) < 1.25)``. A prediction that is NaN or infinite at a valid pixel has no
    alignment: the image scores ``(inf, 0.0)``, so a numerically broken model can never look good.

    ``space='disparity'`` scores the same aligned, clipped map as disparity against the GT disparity (``1 / gt``),
    without inverting: DepthAnything's author says their relative-depth tables are computed in disparity space
    (no official script exists). The default ``'depth'`` is the MiDaS protocol.
    """
    if space not in SPACES:
        raise ValueError(f'unknown space {space!r}; valid: {", ".join(SPACES)}')
    if pred_disparity.shape != gt_depth.shape:
        raise ValueError(f'prediction {tuple(pred_disparity.shape)} and ground truth {tuple(gt_depth.shape)} differ')
    gt = gt_depth.double()
    pred = pred_disparity.double()
    valid = torch.isfinite(gt) & (gt > min_depth)
    if max_depth is not None:
        valid &= gt <= max_depth
    if not valid.any():
        return None
    gt, pred = gt[valid], pred[valid]
    if not torch.isfinite(pred).all():
        return math.inf, 0.
    scale, shift = fit_scale_shift(pred, 1. / gt)
    depth = 1. / (scale * pred + shift).clamp(min=min_disparity)
    depth = depth.clamp(min=min_depth, max=max_depth)
    if space == 'disparity':
        depth, gt = 1. / depth, 1. / gt  # the aligned disparity, clipped to [1 / max_depth, 1 / min_depth]
    abs_rel = ((depth - gt).abs() / gt).mean()
    delta1 = (torch.maximum(depth / gt, gt / depth) < 1.25).double().mean()
    return float(abs_rel), float(delta1)


def da2k_pair_counts(pred: Tensor, pairs: Sequence[Dict], where: str = 'prediction') -> Tuple[int, int]:
    """``(correct, total)`` DA-2K pairs of one image: a pair is correct when the predicted disparity ``pred``
    (``H x W``, at the original image size) is strictly larger at its ``closer_point`` (ties count as wrong).
    Points are ``[row, col]``; one outside ``pred`` is a ValueError naming ``where``, the pair and the point."""
    correct = 0
    for i, pair in enumerate(pairs):
        values = {}
        for name in ('point1', 'point2'):
            row, col = pair[name]
            if not (0 <= row < pred.shape[0] and 0 <= col < pred.shape[1]):
                raise ValueError(f'{where}: pair {i}: {name} {pair[name]} is outside the '
                                 f'{pred.shape[0]}x{pred.shape[1]} prediction')
            values[name] = float(pred[row, col])
        other = 'point2' if pair['closer_point'] == 'point1' else 'point1'
        correct += int(values[pair['closer_point']] > values[other])
    return correct, len(pairs)
