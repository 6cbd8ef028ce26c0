"""Segmentation decode heads registered for mmseg."""
from typing import List, Optional, Sequence, Union

import torch
from mmcv.cnn import build_norm_layer
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from torch import Tensor, nn

from ..registry import MODELS

__all__ = ['LinearProbeHead']


def _default_norm_cfg() -> dict:
    """BatchNorm, synchronised across ranks when training is distributed on GPUs (PyTorch's SyncBatchNorm has no CPU
    implementation: CPU ranks, as ``tools/train.py --launcher pytorch`` runs them without CUDA, keep per-rank BN)."""
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized() \
        and torch.distributed.get_world_size() > 1
    return dict(type='SyncBN' if distributed and torch.cuda.is_available() else 'BN', requires_grad=True)


@MODELS.register_module()
class LinearProbeHead(BaseDecodeHead):
    """The DINOv3 linear segmentation probe: Dropout2d -> BatchNorm -> 1x1 conv.

    Reads the backbone map(s) selected by ``in_index`` (several are resized and concatenated with
    ``input_transform='resize_concat'``). The classifier is initialised N(0, 0.01).

    Args:
        norm_cfg: normalisation before the classifier; default BN, or SyncBN when the process group has more than
            one rank at build time.
        dropout_ratio: Dropout2d probability before the norm (0.1 in the DINOv3 protocol).
        loss_decode: default ``mmseg.CrossEntropyLoss`` (scoped, so the head also builds under the mmdet scope).
    """

    def __init__(self,
                 in_channels: Union[int, Sequence[int]],
                 num_classes: int,
                 norm_cfg: Optional[dict] = None,
                 dropout_ratio: float = 0.1,
                 in_index: Union[int, Sequence[int]] = -1,
                 input_transform: Optional[str] = None,
                 loss_decode: Optional[Union[dict, List[dict]]] = None,
                 ignore_index: int = 255,
                 align_corners: bool = False,
                 init_cfg: Optional[dict] = None):
        channels = sum(in_channels) if input_transform == 'resize_concat' else in_channels
        super().__init__(
            in_channels=in_channels,
            channels=channels,
            num_classes=num_classes,
            dropout_ratio=dropout_ratio,
            norm_cfg=norm_cfg or _default_norm_cfg(),
            in_index=in_index,
            input_transform=input_transform,
            loss_decode=loss_decode or dict(type='mmseg.CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0),
            ignore_index=ignore_index,
            align_corners=align_corners,
            init_cfg=init_cfg or dict(type='Normal', std=0.01, override=dict(name='conv_seg')))
        self.bn = build_norm_layer(self.norm_cfg, channels)[1]
        if self.dropout is None:
            self.dropout = nn.Identity()

    def forward(self, inputs: Sequence[Tensor]) -> Tensor:
        x = self._transform_inputs(inputs)
        return self.conv_seg(self.bn(self.dropout(x)))
