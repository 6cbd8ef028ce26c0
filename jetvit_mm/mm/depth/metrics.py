"""Depth metrics registered for mmengine's evaluator: zero-shot relative depth and DA-2K accuracy (the math is in
:mod:`jetvit_mm.depth.metrics`). Each declares ``higher_is_better`` (what tools/search.py reads)."""
import math
from typing import Dict, Optional, Sequence

import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger
from torch import Tensor

from jetvit_mm.depth.metrics import SPACES, affine_invariant_errors, da2k_pair_counts

from ..registry import METRICS

__all__ = ['AffineInvariantDepthMetric', 'DA2KMetric']


def _pred_map(sample: dict) -> Tensor:
    pred = sample['pred_depth_map']['data']
    return pred[0] if pred.dim() == 3 else pred


@METRICS.register_module()
class AffineInvariantDepthMetric(BaseMetric):
    """Zero-shot relative depth (DepthAnythingV2 / MiDaS protocol): ``abs_rel`` and ``delta1`` (fractions), each
    computed per image after a least-squares scale and shift in disparity space, then averaged over images.

    The prediction is disparity at the original image size (``pred_depth_map``, as ``DepthEstimator`` returns it);
    the ground truth is metric depth (``gt_depth_map``). The arguments: :func:`affine_invariant_errors`'.
    """

    higher_is_better = {'abs_rel': False, 'delta1': True}
    default_prefix = None

    def __init__(self, min_depth: float = 1e-3, max_depth: Optional[float] = None, min_disparity: float = 1e-3,
                 space: str = 'depth', collect_device: str = 'cpu', prefix: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        if space not in SPACES:
            raise ValueError(f'AffineInvariantDepthMetric: unknown space {space!r}; valid: {", ".join(SPACES)}')
        self.min_depth, self.max_depth, self.min_disparity, self.space = min_depth, max_depth, min_disparity, space

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            pred = _pred_map(sample).double()  # scored in fp64 whatever the model ran in (fp16 would round the GT)
            gt = sample['gt_depth_map']['data'].squeeze(0).to(pred)
            if pred.shape != gt.shape:
                raise ValueError(f'{sample.get("img_path")}: prediction {tuple(pred.shape)} and ground truth '
                                 f'{tuple(gt.shape)} differ in size')
            errors = affine_invariant_errors(pred, gt, self.min_depth, self.max_depth, self.min_disparity, self.space)
            if errors is not None and math.isinf(errors[0]):
                MMLogger.get_current_instance().warning(
                    f'{sample.get("img_path")}: the prediction is NaN or infinite at '
                    f'{int((~torch.isfinite(pred) & torch.isfinite(gt)).sum())} pixels; scored AbsRel inf, delta1 0')
            self.results.append(errors if errors is not None else (float('nan'), float('nan')))

    def compute_metrics(self, results: list) -> Dict[str, float]:
        scored = [r for r in results if not math.isnan(r[0])]
        if not scored:
            raise ValueError('no image has valid ground-truth depth in the configured range '
                             f'({self.min_depth}, {self.max_depth}]')
        if len(scored) < len(results):
            MMLogger.get_current_instance().warning(
                f'{len(results) - len(scored)} of {len(results)} images have no valid depth and are not scored')
        broken = sum(math.isinf(r[0]) for r in scored)
        if broken:
            MMLogger.get_current_instance().warning(
                f'{broken} of {len(scored)} images have NaN or infinite predictions: AbsRel is inf')
        return dict(abs_rel=float(np.mean([r[0] for r in scored])), delta1=float(np.mean([r[1] for r in scored])))


@METRICS.register_module()
class DA2KMetric(BaseMetric):
    """DA-2K relative-depth accuracy ``da2k_acc`` (percent): the fraction of annotated pairs whose predicted
    disparity is strictly larger at the closer point (ties count as wrong). Reads ``da2k_pairs`` from the samples
    and the prediction at the original image size."""

    higher_is_better = {'da2k_acc': True}
    default_prefix = None

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            if 'da2k_pairs' not in sample:
                raise KeyError(f'{sample.get("img_path")}: no da2k_pairs in the sample: use DA2KDataset and add '
                               f'"da2k_pairs" to PackSegInputs meta_keys')
            self.results.append(da2k_pair_counts(_pred_map(sample), sample['da2k_pairs'], str(sample.get('img_path'))))

    def compute_metrics(self, results: list) -> Dict[str, float]:
        total = sum(n for _, n in results)
        if total == 0:
            raise ValueError('DA-2K: no annotated pairs were evaluated')
        return dict(da2k_acc=100. * sum(c for c, _ in results) / total)
