"""ViTDet's simple feature pyramid: strides 4/8/16/32(/64) from one stride-16 ViT map."""
from typing import List, Sequence, Tuple

import torch
from torch import nn


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW map."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def _rescale(dim: int, scale: float) -> Tuple[nn.Module, int]:
    """Layers that take a map from stride s to stride s / scale; returns them and their output channels."""
    if scale == 4.0:
        return nn.Sequential(nn.ConvTranspose2d(dim, dim // 2, 2, stride=2), LayerNorm2d(dim // 2), nn.GELU(),
                             nn.ConvTranspose2d(dim // 2, dim // 4, 2, stride=2)), dim // 4
    if scale == 2.0:
        return nn.ConvTranspose2d(dim, dim // 2, 2, stride=2), dim // 2
    if scale == 1.0:
        return nn.Identity(), dim
    if scale == 0.5:
        return nn.MaxPool2d(2, stride=2), dim
    raise ValueError(f'unsupported scale {scale}; valid: 4.0, 2.0, 1.0, 0.5')


class SimpleFeaturePyramid(nn.Module):
    """From the last ViT map (stride ``patch``) build one map per ``scale_factors`` (default strides 4/8/16/32).

    Each level: rescale (deconvs / identity / max-pool), then 1x1 conv + LayerNorm2d and 3x3 conv + LayerNorm2d to
    ``out_channels`` (no conv bias, as ViTDet). ``num_outs`` > levels adds max-pooled levels on top (ViTDet's P6 for
    the RPN); ``in_index``: which of the backbone's outputs to use (default the last).
    """

    def __init__(self, in_channels: int, out_channels: int = 256,
                 scale_factors: Sequence[float] = (4.0, 2.0, 1.0, 0.5), num_outs: int = 5,
                 in_index: int = -1) -> None:
        super().__init__()
        if num_outs < len(scale_factors):
            raise ValueError(f'num_outs ({num_outs}) must be >= the number of scale factors ({len(scale_factors)})')
        self.in_index = in_index
        self.num_outs = num_outs
        self.scale_factors = tuple(scale_factors)
        self.stages = nn.ModuleList()
        for scale in self.scale_factors:
            rescale, dim = _rescale(in_channels, scale)
            self.stages.append(nn.Sequential(
                rescale,
                nn.Conv2d(dim, out_channels, 1, bias=False), LayerNorm2d(out_channels),
                nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False), LayerNorm2d(out_channels)))

    def forward(self, inputs: Sequence[torch.Tensor]) -> Tuple[torch.Tensor, ...]:
        x = inputs[self.in_index] if isinstance(inputs, (list, tuple)) else inputs
        outs: List[torch.Tensor] = [stage(x) for stage in self.stages]
        while len(outs) < self.num_outs:
            outs.append(nn.functional.max_pool2d(outs[-1], 1, stride=2))
        return tuple(outs)
