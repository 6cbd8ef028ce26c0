"""Relative depth in OpenMMLab: the DPT head for mmseg's ``DepthEstimator``, pseudo-label fine-tuning, the
DepthAnythingV2 preprocessing, the zero-shot metrics and DA-2K.

Registered types:

- ``DPTDepthHead`` (MODELS): :class:`~jetvit_mm.models.heads.dpt.DPTHead` with mmseg's decode-head interface
  (``loss``, ``predict``, ``num_classes = out_channels = 1``); its parameters keep the original names, so an mmseg
  checkpoint's ``decode_head.*`` is an official ``depth_head.*`` renamed.
- ``JetViTDepthAnything`` (MODELS): the pure backbone + head model (the pseudo-label teacher).
- ``PseudoLabelDepthEstimator`` (MODELS): mmseg's ``DepthEstimator`` whose training targets are a frozen
  teacher's disparities on the same augmented batch (no labels needed).
- ``ScaleShiftInvariantLoss`` (MODELS): the Depth Anything affine-invariant disparity loss (+ gradient matching).
- ``DepthAnythingResize`` (TRANSFORMS): the original test-time resize (short side 518, multiples of 14, bicubic).
- ``DA2KDataset`` (DATASETS): DA-2K's ``annotations.json``; every point is checked against its image.
- ``AffineInvariantDepthMetric``, ``DA2KMetric`` (METRICS): ``abs_rel``/``delta1`` after a per-image least-squares
  scale and shift in disparity space; DA-2K pair accuracy ``da2k_acc`` (percent). Each declares
  ``higher_is_better``.
"""
import json
import math
import os.path as osp
from typing import Dict, List, Optional, Sequence, Tuple

import mmcv
import numpy as np
import torch
import torch.nn.functional as F
from mmcv.image.geometric import cv2_interp_codes
from mmcv.transforms import BaseTransform
from mmengine.dataset import BaseDataset
from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger
from mmseg.models.segmentors import DepthEstimator
from mmseg.utils import add_prefix
from torch import Tensor, nn

from jetvit_mm.models.depth_anything import JetViTDepthAnything, depth_anything_input_size
from jetvit_mm.models.heads.dpt import DPTHead, dpt_preset

from .registry import DATASETS, METRICS, MODELS, TRANSFORMS

__all__ = ['AffineInvariantDepthMetric', 'DA2KDataset', 'DA2KMetric', 'DPTDepthHead', 'DepthAnythingResize',
           'JetViTDepthAnything', 'PseudoLabelDepthEstimator', 'ScaleShiftInvariantLoss', 'affine_invariant_errors',
           'fit_scale_shift', 'gradient_matching_loss', 'ssi_loss']

MODELS.register_module(name='JetViTDepthAnything', module=JetViTDepthAnything)


# ---------------------------------------------------------------------------------------------- relative-depth math
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


def _normalise_median(x: Tensor, valid: Tensor, eps: float = 1e-6) -> Tensor:
    """``(x - median) / mean|x - median|`` over the valid pixels of one image (Depth Anything's ssi normalisation)."""
    values = x[valid]
    median = values.median()
    return (x - median) / ((values - median).abs().mean() + eps)


def _check_ignore_top(ignore_top: float) -> None:
    if not 0. <= ignore_top < 1.:
        raise ValueError(f'ignore_top is a fraction of the pixels in [0, 1), got {ignore_top}')


def ssi_loss(pred: Tensor, target: Tensor, valid: Tensor, ignore_top: float = 0.
             ) -> Tuple[Tensor, List[Tensor], Tensor]:
    """Scale-and-shift-invariant loss of ``[B, H, W]`` disparities: mean over images of the mean absolute
    difference of the median/MAD-normalised maps. ``ignore_top``: the fraction of each image's valid pixels with the
    largest difference left out of the loss (DepthAnythingV2 drops the top 10 % on pseudo-labelled images, where
    the labels are noisiest). Also returns the per-image residual maps (zero where not counted) and the counted
    pixels."""
    _check_ignore_top(ignore_top)
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


@MODELS.register_module()
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
        _check_ignore_top(ignore_top)  # at build time, not at the first step
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


# ---------------------------------------------------------------------------------------------- models
@MODELS.register_module()
class DPTDepthHead(DPTHead):
    """DepthAnythingV2's DPT head as an mmseg decode head (for ``DepthEstimator``): predicts disparity.

    The backbone must return the four tapped layers (JetViT's default ``out_indices`` for DINOv2). Parameter names
    are the original ones, so ``checkpoint`` (an official ``depth_anything_v2_vit*.pth``, a runner checkpoint with
    ``decode_head.*``, or a bare head) loads strictly.

    Args:
        in_channels: the ViT width.
        preset: ``'vits'``/``'vitb'``/``'vitl'``/``'vitg'`` (or a DINOv2 model name): ``features`` and
            ``out_channels`` of that released size; explicit ``features``/``out_channels`` override it.
        features, out_channels: the head widths (see :class:`~jetvit_mm.models.heads.dpt.DPTHead`). The decode-head
            attribute ``out_channels`` mmseg reads stays 1 (one disparity channel).
        checkpoint: weights loaded at build time.
        loss_decode: the training loss on disparity; default ``ScaleShiftInvariantLoss``.
        min_depth: ground-truth depths at or below it are invalid (padding, holes) in :meth:`loss_by_feat`.
        align_corners: bilinear resizes of the prediction (and mmseg's resize back to the original image size):
            True, as DepthAnythingV2.
    """

    num_classes = 1
    out_channels = 1

    def __init__(self, in_channels: int, features: Optional[int] = None, out_channels: Optional[Sequence[int]] = None,
                 preset: Optional[str] = None, patch_size: int = 14, checkpoint: Optional[str] = None,
                 loss_decode: Optional[dict] = None, min_depth: float = 1e-3, align_corners: bool = True) -> None:
        if features is None or out_channels is None:
            if preset is None:
                raise ValueError('DPTDepthHead needs a preset (vits, vitb, vitl, vitg) or features and out_channels')
            widths = dpt_preset(preset)
            features = widths.features if features is None else features
            out_channels = widths.out_channels if out_channels is None else out_channels
        super().__init__(in_channels, features, out_channels, patch_size)
        self.loss_decode = MODELS.build(loss_decode or dict(type='ScaleShiftInvariantLoss'))
        self.min_depth = min_depth
        self.align_corners = align_corners
        if checkpoint is not None:
            self.load_checkpoint(checkpoint)

    def init_weights(self) -> None:
        """PyTorch's default initialisation (as DepthAnythingV2) or the loaded checkpoint: nothing to do."""

    def _resize(self, x: Tensor, size: Sequence[int]) -> Tensor:
        if tuple(x.shape[-2:]) == tuple(size):
            return x
        return F.interpolate(x, tuple(size), mode='bilinear', align_corners=self.align_corners)

    def predict(self, inputs: Sequence[Tensor], batch_img_metas: List[dict], test_cfg: Optional[dict] = None
                ) -> Tensor:
        """Disparity ``[B, 1, H, W]`` at the (padded) input size; the estimator resizes it to the original size."""
        meta = batch_img_metas[0]  # as mmseg's BaseDecodeHead.predict_by_feat
        if isinstance(meta['img_shape'], torch.Size) or 'pad_shape' not in meta:  # slide inference: the crop
            size = meta['img_shape']
        else:
            size = meta['pad_shape']
        return self._resize(self(inputs), size[:2])

    def loss(self, inputs: Sequence[Tensor], batch_data_samples: list, train_cfg: Optional[dict] = None
             ) -> Dict[str, Tensor]:
        return self.loss_by_feat(self(inputs), batch_data_samples)

    def loss_by_feat(self, pred: Tensor, batch_data_samples: list) -> Dict[str, Tensor]:
        """Loss against ground-truth *depth* maps (``gt_depth_map``), compared as disparity on valid pixels."""
        gt = torch.stack([s.gt_depth_map.data for s in batch_data_samples]).to(pred)
        valid = torch.isfinite(gt) & (gt > self.min_depth)
        target = torch.where(valid, 1. / gt.clamp(min=self.min_depth), torch.zeros_like(gt))
        return self.disparity_loss(self._resize(pred, gt.shape[-2:]), target, valid)

    def disparity_loss(self, pred: Tensor, target: Tensor, valid: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """Loss against target *disparities* (pseudo-labels), ``[B, 1, H, W]``."""
        pred = self._resize(pred, target.shape[-2:])
        return {self.loss_decode.loss_name: self.loss_decode(pred, target, valid)}


@MODELS.register_module()
class PseudoLabelDepthEstimator(DepthEstimator):
    """mmseg's ``DepthEstimator`` trained on a frozen teacher's disparities (DepthAnythingV2's pseudo-label recipe).

    In every training step the teacher (a ``JetViTDepthAnything``, usually the official model) predicts disparity
    on the same augmented, normalised batch; the student (``backbone`` + ``decode_head``) learns it with the head's
    scale-and-shift-invariant loss on the image area (padding excluded). Labels in the batch are ignored.
    Prediction and testing are the plain ``DepthEstimator``'s, so evaluation configs load the checkpoint as is
    (the ``teacher.*`` weights in it are skipped with a warning).

    Args:
        teacher: config of the teacher model; built frozen, in eval mode.
        backbone, decode_head, ...: as ``DepthEstimator`` (``decode_head`` must offer ``disparity_loss``,
            e.g. ``DPTDepthHead``).
    """

    def __init__(self, teacher: dict, backbone: dict, decode_head: dict, **kwargs) -> None:
        super().__init__(backbone=backbone, decode_head=decode_head, **kwargs)
        if not hasattr(self.decode_head, 'disparity_loss'):
            raise TypeError(f'{type(self.decode_head).__name__} has no disparity_loss(); use DPTDepthHead')
        self.teacher = MODELS.build(dict(teacher, frozen=True))

    def loss(self, inputs: Tensor, data_samples: Optional[list] = None) -> Dict[str, Tensor]:
        with torch.no_grad():
            target = self.teacher(inputs)[:, None].float()
        valid = torch.zeros_like(target, dtype=torch.bool)
        for i, sample in enumerate(data_samples or [None] * inputs.shape[0]):
            h, w = sample.metainfo['img_shape'][:2] if sample is not None else inputs.shape[-2:]
            valid[i, :, :h, :w] = True
        pred = self.decode_head(self.extract_feat(inputs))
        return add_prefix(self.decode_head.disparity_loss(pred, target, valid), 'decode')


# ---------------------------------------------------------------------------------------------- data
@TRANSFORMS.register_module()
class DepthAnythingResize(BaseTransform):
    """DepthAnythingV2's test-time resize of ``img``: short side to ``size`` keeping the aspect ratio, both sides
    rounded to multiples of ``multiple`` (never below ``size``), cv2 bicubic on float pixels (no uint8 rounding).

    ``size=None`` keeps each image's own short side: the original resolution, only rounded to the patch grid
    (``infer_image(image, input_size=min(h, w))``; DIODE 768x1024 -> 770x1022, Sintel 436x1024 -> 448x1022,
    Cityscapes 1024x2048 -> 1036x2044), the JetViT paper's protocol for DIODE, Sintel and Cityscapes.

    Ground-truth maps keep their size: the estimator resizes the prediction back to the original image size
    (bilinear, align_corners=True), where metrics compare. Any image size works, multiples of 14 or not.
    """

    def __init__(self, size: Optional[int] = 518, multiple: int = 14, interpolation: str = 'bicubic') -> None:
        if interpolation not in cv2_interp_codes:
            raise ValueError(f'unknown interpolation {interpolation!r}; valid: {", ".join(cv2_interp_codes)}')
        if not ((size is None or isinstance(size, int) and size > 0) and isinstance(multiple, int) and multiple > 0):
            raise ValueError(f'size must be a positive int or None (original resolution) and multiple a positive '
                             f'int, got size={size!r}, multiple={multiple!r}')
        self.size, self.multiple, self.interpolation = size, multiple, interpolation

    def transform(self, results: dict) -> dict:
        img = results['img']
        h, w = img.shape[:2]
        new_h, new_w = depth_anything_input_size(h, w, min(h, w) if self.size is None else self.size, self.multiple)
        results['img'] = mmcv.imresize(img.astype(np.float32), (new_w, new_h), interpolation=self.interpolation,
                                       backend='cv2')
        results['img_shape'] = (new_h, new_w)
        results['scale_factor'] = (new_w / w, new_h / h)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(size={self.size}, multiple={self.multiple}, interpolation={self.interpolation})'


def _image_size(path: str) -> Tuple[int, int]:
    """``(height, width)`` as the pipeline sees the image: mmcv's loader (OpenCV) applies the EXIF orientation."""
    from PIL import Image

    with Image.open(path) as image:
        width, height = image.size
        if image.getexif().get(0x0112, 1) in (5, 6, 7, 8):  # rotated by 90 degrees: width and height swap
            width, height = height, width
    return height, width


@DATASETS.register_module()
class DA2KDataset(BaseDataset):
    """DA-2K: ``annotations.json`` maps image paths (relative to ``data_root``) to lists of
    ``{"point1": [h, w], "point2": [h, w], "closer_point": "point1" | "point2"}``.

    Each sample carries ``da2k_pairs`` (add it to ``PackSegInputs``' ``meta_keys``) for :class:`DA2KMetric`.
    At load time every image must exist and every point must lie inside its image (integer pixel ``[row, col]``;
    fractional coordinates are floored); otherwise a ValueError names the file, the pair and the point.
    """

    METAINFO = dict(name='DA-2K')

    def __init__(self, ann_file: str = 'annotations.json', **kwargs) -> None:
        super().__init__(ann_file=ann_file, **kwargs)

    def load_data_list(self) -> List[dict]:
        if not osp.isfile(self.ann_file):
            raise FileNotFoundError(f'DA-2K annotations not found: {self.ann_file}')
        with open(self.ann_file) as f:
            annotations = json.load(f)
        if not isinstance(annotations, dict):
            raise ValueError(f'{self.ann_file}: expected an object mapping image paths to lists of pairs')
        img_root = self.data_prefix.get('img_path', '') or self.data_root
        data_list = []
        for rel, pairs in annotations.items():
            path = osp.join(img_root, rel)
            if not osp.isfile(path):
                raise FileNotFoundError(f'{self.ann_file}: image {rel!r} not found at {path}')
            size = _image_size(path)
            checked = [self._check_pair(pair, size, f'{self.ann_file}: image {rel!r}: pair {i}')
                       for i, pair in enumerate(pairs)]
            data_list.append(dict(img_path=path, da2k_pairs=checked, seg_fields=[]))
        return data_list

    @staticmethod
    def _check_pair(pair: dict, size: Tuple[int, int], where: str) -> dict:
        missing = [k for k in ('point1', 'point2', 'closer_point') if k not in pair]
        if missing:
            raise ValueError(f'{where}: missing {missing} (keys: {sorted(pair)})')
        if pair['closer_point'] not in ('point1', 'point2'):
            raise ValueError(f'{where}: closer_point must be "point1" or "point2", got {pair["closer_point"]!r}')
        out = dict(closer_point=pair['closer_point'])
        for name in ('point1', 'point2'):
            point = pair[name]
            if not (isinstance(point, (list, tuple)) and len(point) == 2):
                raise ValueError(f'{where}: {name} must be [h, w], got {point!r}')
            row, col = (int(math.floor(v)) for v in point)
            if not (0 <= row < size[0] and 0 <= col < size[1]):
                raise ValueError(f'{where}: {name} {list(point)} is outside the image ({size[0]}x{size[1]}, '
                                 f'points are [h, w])')
            out[name] = [row, col]
        return out


# ---------------------------------------------------------------------------------------------- metrics
def _pred_map(sample: dict) -> Tensor:
    pred = sample['pred_depth_map']['data']
    return pred[0] if pred.dim() == 3 else pred


@METRICS.register_module()
class AffineInvariantDepthMetric(BaseMetric):
    """Zero-shot relative depth (DepthAnythingV2 / MiDaS protocol): ``abs_rel`` and ``delta1`` (fractions), each
    computed per image after a least-squares scale and shift in disparity space, then averaged over images.

    The prediction is disparity at the original image size (``pred_depth_map``, as ``DepthEstimator`` returns it);
    the ground truth is metric depth (``gt_depth_map``). See :func:`affine_invariant_errors`.

    Args:
        min_depth, max_depth: the dataset's valid depth range (e.g. NYU 1e-3 / 10 m); predictions are clipped to it.
        min_disparity: aligned disparities are clipped at this value before inversion.
        space: ``'depth'`` (default, MiDaS) or ``'disparity'`` (the errors of the aligned disparity, as DepthAnything
            states it reports).
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
            pred = _pred_map(sample)
            correct = 0
            for i, pair in enumerate(sample['da2k_pairs']):
                values = {}
                for name in ('point1', 'point2'):
                    row, col = pair[name]
                    if not (0 <= row < pred.shape[0] and 0 <= col < pred.shape[1]):
                        raise ValueError(f'{sample.get("img_path")}: pair {i}: {name} {pair[name]} is outside the '
                                         f'{pred.shape[0]}x{pred.shape[1]} prediction')
                    values[name] = float(pred[row, col])
                other = 'point2' if pair['closer_point'] == 'point1' else 'point1'
                correct += int(values[pair['closer_point']] > values[other])
            self.results.append((correct, len(sample['da2k_pairs'])))

    def compute_metrics(self, results: list) -> Dict[str, float]:
        total = sum(n for _, n in results)
        if total == 0:
            raise ValueError('DA-2K: no annotated pairs were evaluated')
        return dict(da2k_acc=100. * sum(c for c, _ in results) / total)
