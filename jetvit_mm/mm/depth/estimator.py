"""Depth models for mmseg: the DPT head as a decode head, the pseudo-label estimator, the pure JetViTDepthAnything
(the pseudo-label teacher)."""
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F
from mmseg.models.segmentors import DepthEstimator
from mmseg.utils import add_prefix
from torch import Tensor

from jetvit_mm.models.depth_anything import JetViTDepthAnything
from jetvit_mm.models.heads.dpt import DPTHead, dpt_preset

from ..registry import MODELS

__all__ = ['DPTDepthHead', 'JetViTDepthAnything', 'PseudoLabelDepthEstimator']

MODELS.register_module(name='JetViTDepthAnything', module=JetViTDepthAnything)


@MODELS.register_module()
class DPTDepthHead(DPTHead):
    """DepthAnythingV2's DPT head as an mmseg decode head (for ``DepthEstimator``): predicts disparity.

    The backbone must return the four tapped layers (JetViT's default ``out_indices`` for DINOv2). Parameter names
    are the original ones, so ``checkpoint`` (an official ``depth_anything_v2_vit*.pth``, a runner checkpoint with
    ``decode_head.*``, or a bare head) loads strictly.

    Args:
        preset: ``'vits'``/``'vitb'``/``'vitl'``/``'vitg'`` (or a DINOv2 model name): ``features`` and
            ``out_channels`` of that released size; explicit ``features``/``out_channels`` override it (the
            decode-head attribute ``out_channels`` mmseg reads stays 1).
        loss_decode: the training loss on disparity; default ``ScaleShiftInvariantLoss``.
        min_depth: ground-truth depths at or below it are invalid (padding, holes) in :meth:`loss_by_feat`.
        align_corners: of the prediction's bilinear resizes: True, as DepthAnythingV2.
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

    The teacher (``teacher``: a ``JetViTDepthAnything`` config, built frozen) predicts disparity on the same augmented
    batch; the student learns it with the head's ``disparity_loss`` on the image area. Labels are ignored.
    Prediction and testing are the plain ``DepthEstimator``'s (the checkpoint's ``teacher.*`` weights are skipped
    with a warning).
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
