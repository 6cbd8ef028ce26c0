"""DepthAnythingV2's DPT depth head: the original structure and parameter names, so that the ``depth_head.``
part of an official checkpoint loads strictly.

Layout (DepthAnything/Depth-Anything-V2 ``depth_anything_v2/dpt.py`` and ``util/blocks.py``): per tapped layer a
1x1 ``projects.{i}`` conv to ``out_channels[i]``, then ``resize_layers`` x4 (ConvTranspose k4 s4), x2
(ConvTranspose k2 s2), x1 (Identity), x1/2 (Conv k3 s2 p1); ``scratch.layer{1-4}_rn`` 3x3 convs (no bias) to
``features``; fusion blocks ``scratch.refinenet4 -> 1`` (two pre-activation residual units, bilinear resize with
``align_corners=True`` to the next map's size, the last one x2, then a 1x1 ``out_conv``); ``scratch.output_conv1``
(3x3, features/2), a bilinear resize to (14 h, 14 w), ``scratch.output_conv2`` = 3x3 conv to 32, ReLU, 1x1 conv to
1, ReLU. No batch norm, no class token (``use_clstoken=False`` in every released model). The output is relative
inverse depth (disparity: larger = closer).
"""
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from ..checkpoint import apply_checkpoint, depth_head_state, read, strip_prefix

__all__ = ['DPT_PRESETS', 'DPTHead', 'DPTPreset', 'FeatureFusionBlock', 'ResidualConvUnit', 'dpt_preset',
           'head_state_from_checkpoint']


@dataclass(frozen=True)
class DPTPreset:
    """Head widths of one released DepthAnythingV2 size."""

    features: int
    out_channels: Tuple[int, int, int, int]


# DepthAnythingV2's model_configs: encoder -> features / out_channels
DPT_PRESETS: Dict[str, DPTPreset] = {
    'vits': DPTPreset(64, (48, 96, 192, 384)),
    'vitb': DPTPreset(128, (96, 192, 384, 768)),
    'vitl': DPTPreset(256, (256, 512, 1024, 1024)),
    'vitg': DPTPreset(384, (1536, 1536, 1536, 1536)),
}


def dpt_preset(name: str) -> DPTPreset:
    """The preset of ``name``: an encoder key (``'vitl'``) or a backbone model name (``'dinov2_vitl14'``)."""
    key = name
    if key not in DPT_PRESETS:
        match = re.fullmatch(r'dinov2_(vit[sblg])14', name)
        key = match.group(1) if match else name
    if key not in DPT_PRESETS:
        raise ValueError(f'no DPT preset for {name!r}; valid: {", ".join(DPT_PRESETS)} or the backbone names '
                         f'dinov2_vit{{s,b,l,g}}14')
    return DPT_PRESETS[key]


class ResidualConvUnit(nn.Module):
    """Pre-activation residual unit: ``x + conv2(relu(conv1(relu(x))))``."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(features, features, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(features, features, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.relu(self.conv1(F.relu(x))))


class FeatureFusionBlock(nn.Module):
    """Adds the (refined) skip map, refines, resizes (``size`` or x2, bilinear, align_corners) and projects."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.out_conv = nn.Conv2d(features, features, kernel_size=1)
        self.resConfUnit1 = ResidualConvUnit(features)  # unused by refinenet4 but part of every checkpoint
        self.resConfUnit2 = ResidualConvUnit(features)

    def forward(self, x: torch.Tensor, skip: Optional[torch.Tensor] = None,
                size: Optional[Sequence[int]] = None) -> torch.Tensor:
        if skip is not None:
            x = x + self.resConfUnit1(skip)
        x = self.resConfUnit2(x)
        resize = dict(scale_factor=2) if size is None else dict(size=tuple(size))
        x = F.interpolate(x, **resize, mode='bilinear', align_corners=True)
        return self.out_conv(x)


DPT_PARTS = ('projects', 'resize_layers', 'scratch')  # the head's top-level modules, in the original names


class DPTHead(nn.Module):
    """DepthAnythingV2's DPT head: four ViT maps on one patch grid -> disparity ``[B, 1, p*h, p*w]``.

    Args:
        in_channels: ViT width (1024 for ViT-L).
        features: fusion width (``DPT_PRESETS``: S 64, B 128, L 256, G 384).
        out_channels: widths of the four projected maps (S [48,96,192,384], B [96,192,384,768],
            L [256,512,1024,1024], G [1536]*4).
        patch_size: the output is resized to (patch_size * h, patch_size * w), the input image size.
    """

    head_hidden = 32  # output_conv2's hidden width, fixed in every released model

    def __init__(self, in_channels: int, features: int = 256,
                 out_channels: Sequence[int] = (256, 512, 1024, 1024), patch_size: int = 14) -> None:
        super().__init__()
        if len(out_channels) != 4:
            raise ValueError(f'out_channels needs four widths (one per tapped layer), got {list(out_channels)}')
        self.in_channels, self.features, self.patch_size = in_channels, features, patch_size
        self.project_channels = tuple(out_channels)
        self.projects = nn.ModuleList(nn.Conv2d(in_channels, c, kernel_size=1) for c in out_channels)
        c = out_channels
        self.resize_layers = nn.ModuleList([
            nn.ConvTranspose2d(c[0], c[0], kernel_size=4, stride=4),
            nn.ConvTranspose2d(c[1], c[1], kernel_size=2, stride=2),
            nn.Identity(),
            nn.Conv2d(c[3], c[3], kernel_size=3, stride=2, padding=1),
        ])
        self.scratch = nn.Module()
        for i, width in enumerate(out_channels, start=1):
            setattr(self.scratch, f'layer{i}_rn', nn.Conv2d(width, features, kernel_size=3, padding=1, bias=False))
        for i in range(1, 5):
            setattr(self.scratch, f'refinenet{i}', FeatureFusionBlock(features))
        self.scratch.output_conv1 = nn.Conv2d(features, features // 2, kernel_size=3, padding=1)
        self.scratch.output_conv2 = nn.Sequential(
            nn.Conv2d(features // 2, self.head_hidden, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.Conv2d(self.head_hidden, 1, kernel_size=1),
            nn.ReLU(),
        )

    @classmethod
    def from_preset(cls, name: str, in_channels: int, patch_size: int = 14) -> 'DPTHead':
        """The head of a released size: ``DPTHead.from_preset('vitl', 1024)``."""
        preset = dpt_preset(name)
        return cls(in_channels, preset.features, preset.out_channels, patch_size)

    def forward(self, features: Sequence[torch.Tensor]) -> torch.Tensor:
        """``features``: the four tapped layers as NCHW maps on one ``h x w`` patch grid (after the final norm)."""
        if len(features) != 4:
            raise ValueError(f'the DPT head takes four feature maps (the tapped layers), got {len(features)}')
        grid = tuple(features[0].shape[-2:])
        for i, x in enumerate(features):
            if x.dim() != 4 or x.shape[1] != self.in_channels or tuple(x.shape[-2:]) != grid:
                raise ValueError(f'feature map {i} has shape {tuple(x.shape)}; expected [B, {self.in_channels}, '
                                 f'{grid[0]}, {grid[1]}] like map 0')
        maps = [resize(project(x)) for x, project, resize in zip(features, self.projects, self.resize_layers)]
        s = self.scratch
        rn = [s.layer1_rn(maps[0]), s.layer2_rn(maps[1]), s.layer3_rn(maps[2]), s.layer4_rn(maps[3])]
        path = s.refinenet4(rn[3], size=rn[2].shape[-2:])
        path = s.refinenet3(path, rn[2], size=rn[1].shape[-2:])
        path = s.refinenet2(path, rn[1], size=rn[0].shape[-2:])
        path = s.refinenet1(path, rn[0])
        out = s.output_conv1(path)
        out = F.interpolate(out, (grid[0] * self.patch_size, grid[1] * self.patch_size), mode='bilinear',
                            align_corners=True)
        return F.relu(s.output_conv2(out))

    def checkpoint_filter_fn(self, state: Dict[str, torch.Tensor], source: str = 'checkpoint'
                             ) -> Dict[str, torch.Tensor]:
        """The key map of :func:`~jetvit_mm.models.checkpoint.apply_checkpoint`: :func:`head_state_from_checkpoint`."""
        return head_state_from_checkpoint(state, source)

    def load_checkpoint(self, path: Union[str, Path]) -> None:
        """Load the head part of an official DepthAnythingV2 file, an mmseg runner checkpoint or a bare head."""
        apply_checkpoint(self, read(path))


def head_state_from_checkpoint(state: Dict[str, torch.Tensor], source: Union[str, Path] = 'checkpoint'
                               ) -> Dict[str, torch.Tensor]:
    """The DPT head weights of ``state``: under ``depth_head.`` (official DepthAnythingV2, JetViTDepthAnything),
    ``decode_head.`` (an mmseg depth estimator's runner checkpoint), or unprefixed (a bare head)."""
    if any(k.startswith('depth_head.') for k in state):
        head = depth_head_state(state)
    elif any(k.startswith('decode_head.') for k in state):
        head = strip_prefix(state, 'decode_head.')
    elif any(k.startswith('scratch.') for k in state):
        head = dict(state)
    else:
        raise ValueError(f'{source} holds no DPT head weights (no depth_head.*, decode_head.* or scratch.* keys)')
    lacking = [part for part in DPT_PARTS if not any(k.startswith(f'{part}.') for k in head)]
    if lacking:  # e.g. a segmentation checkpoint, whose decode_head is another head
        found = sorted({k.split('.')[0] for k in head})
        raise ValueError(f'{source}: its head is not a DPT head: no {", ".join(f"{p}.*" for p in lacking)} keys '
                         f'(found {found}); a DepthAnythingV2 head has {", ".join(f"{p}.*" for p in DPT_PARTS)}')
    return head
