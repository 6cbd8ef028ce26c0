"""JetViT-DepthAnything: a JetViT on a DINOv2 teacher (any L/W/F arch) + DepthAnythingV2's DPT head.

With ``arch`` all F and an official ``depth_anything_v2_vit{s,b,l}.pth`` it is DepthAnythingV2 itself; with a
searched arch and an exported hybrid backbone it is the paper's JetViT-DepthAnything. ``forward`` takes normalised
images whose sides are multiples of 14 (anything else raises a ValueError naming the patch size); ``infer`` takes
images of any size and applies the original preprocessing (short side resized to >= 518 keeping the aspect ratio,
both sides multiples of 14, bicubic, ImageNet normalisation) and resizes the prediction back to the input size
(bilinear, align_corners=True).
"""
import math
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from .checkpoint import Checkpoint, apply_checkpoint, depth_head_state, read, save, strip_prefix, to_jetvit_names
from .heads.dpt import DPTHead, dpt_preset, head_state_from_checkpoint
from .jetvit import JetViT

__all__ = ['IMAGENET_MEAN', 'IMAGENET_STD', 'JetViTDepthAnything', 'depth_anything_input_size',
           'depth_state', 'export_mmseg_checkpoint', 'preprocess_depth_anything']

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
StateDict = Dict[str, torch.Tensor]


def _multiple_at_least(x: float, multiple: int, min_val: int) -> int:
    """DepthAnythingV2's ``constrain_to_multiple_of``: nearest multiple (half to even, as np.round), else ceil."""
    y = int(round(x / multiple) * multiple)
    if y < min_val:
        y = int(math.ceil(x / multiple) * multiple)
    return y


MAX_INPUT_PIXELS = 1 << 26  # 8192 x 8192: beyond it a resize is a malformed image, not a picture to predict on


def depth_anything_input_size(height: int, width: int, size: int = 518, multiple: int = 14,
                              max_pixels: int = MAX_INPUT_PIXELS) -> Tuple[int, int]:
    """The network input size DepthAnythingV2 uses for a ``height x width`` image: ``(new_h, new_w)``.

    The original ``Resize(keep_aspect_ratio=True, resize_method='lower_bound', ensure_multiple_of=14)``: scale so
    that the short side becomes ``size``, then round each side to a multiple of ``multiple`` (never below ``size``).
    A resize to more than ``max_pixels`` (a sliver of an image: 1x4000 at 518 would be 518x2072000) is refused with a
    ValueError instead of allocating gigabytes.
    """
    if height <= 0 or width <= 0:
        raise ValueError(f'image size must be positive, got {height}x{width}')
    scale = max(size / height, size / width)
    new_h, new_w = _multiple_at_least(scale * height, multiple, size), _multiple_at_least(scale * width, multiple, size)
    if new_h * new_w > max_pixels:
        raise ValueError(f'a {height}x{width} image (aspect ratio {max(height, width) / min(height, width):.0f}:1) '
                         f'resized to short side {size} would be {new_h}x{new_w}, over {max_pixels} pixels; crop or '
                         f'pad it to a photo-like aspect ratio, or choose a smaller size')
    return new_h, new_w


def preprocess_depth_anything(images: torch.Tensor, size: int = 518, multiple: int = 14) -> torch.Tensor:
    """RGB images in [0, 1], ``[B, 3, H, W]`` -> the network input: bicubic resize, ImageNet normalisation."""
    if images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f'expected RGB images [B, 3, H, W] in [0, 1], got shape {tuple(images.shape)}')
    new_size = depth_anything_input_size(*images.shape[-2:], size=size, multiple=multiple)
    x = F.interpolate(images.float(), new_size, mode='bicubic', align_corners=False)
    mean = x.new_tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = x.new_tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (x - mean) / std


def depth_state(state: StateDict, source: str = 'checkpoint', head: str = 'depth_head.') -> Tuple[StateDict, str]:
    """A depth checkpoint's weights as ``backbone.*`` (JetViT names, the saved spec with them) + its DPT head's under
    ``head`` (``'depth_head.'``, ``'decode_head.'``), and its format.

    Formats: official DepthAnythingV2 (``pretrained.*`` + ``depth_head.*``), and ``backbone.*`` + ``depth_head.*`` /
    ``decode_head.*`` (this class's own state dict, an mmseg depth estimator's checkpoint, an exported hybrid with its
    head).
    """
    if any(k.startswith('pretrained.') for k in state):
        (backbone, fmt), head_state = to_jetvit_names(state), depth_head_state(state)
    elif any(k.startswith('backbone.') for k in state):
        backbone, fmt = to_jetvit_names(strip_prefix(state, 'backbone.'))
        head_state, fmt = head_state_from_checkpoint(state, source), f'backbone + head ({fmt})'
    else:
        raise ValueError(f'{source} is not a depth checkpoint: expected pretrained.* + depth_head.* '
                         f'(DepthAnythingV2) or backbone.* + depth_head.*/decode_head.* keys')
    return {**{f'backbone.{k}': v for k, v in backbone.items()}, **{head + k: v for k, v in head_state.items()}}, fmt


class JetViTDepthAnything(nn.Module):
    """JetViT backbone (its four tapped layers) + DepthAnythingV2's DPT head; outputs disparity ``[B, H, W]``.

    Args:
        model_name: a DINOv2 variant (``dinov2_vits14``, ``dinov2_vitb14``, ``dinov2_vitl14``, ``dinov2_vitg14``).
        arch: one L/W/F letter per layer; None = all F (DepthAnythingV2 itself).
        checkpoint: an official DepthAnythingV2 file, or a ``backbone.*`` + head checkpoint (see
            :func:`depth_state`), loaded strictly into both parts.
        features, out_channels: head widths; default: ``model_name``'s :data:`~jetvit_mm.models.heads.DPT_PRESETS`.
        input_size: :meth:`infer`'s short-side target (518 in DepthAnythingV2).
        frozen: no gradients and always eval mode (a teacher).
        **backbone_kwargs: further :class:`~jetvit_mm.models.jetvit.JetViT` arguments (``out_indices``, ``mixers``,
            ``embed_dim``, ...).
    """

    def __init__(self, model_name: str = 'dinov2_vitl14', arch: Optional[str] = None,
                 checkpoint: Optional[Union[str, Path]] = None, features: Optional[int] = None,
                 out_channels: Optional[Sequence[int]] = None, input_size: int = 518, frozen: bool = False,
                 **backbone_kwargs) -> None:
        super().__init__()
        self.backbone = JetViT(model_name, arch=arch, **backbone_kwargs)
        if len(self.backbone.out_indices) != 4:
            raise ValueError(f'the DPT head needs four tapped layers, got out_indices={self.backbone.out_indices}')
        if features is None or out_channels is None:
            preset = dpt_preset(model_name)
            features = preset.features if features is None else features
            out_channels = preset.out_channels if out_channels is None else out_channels
        self.depth_head = DPTHead(self.backbone.embed_dim, features, out_channels, self.backbone.patch_size)
        self.input_size = input_size
        self.frozen = frozen
        if checkpoint is not None:
            self.load_checkpoint(checkpoint)
            if self.backbone.inherit == 'mlp':  # the checkpoint brought q/k/v/o back into the efficient layers
                self.backbone.reset_efficient_mixers()
        if frozen:
            self.requires_grad_(False)
            self.eval()

    @classmethod
    def from_checkpoint(cls, path: Union[str, Path], model_name: str = 'dinov2_vitl14', arch: Optional[str] = None,
                        **kwargs) -> 'JetViTDepthAnything':
        """Build and load backbone and head from one file (``depth_anything_v2_vitl.pth``, ...)."""
        return cls(model_name, arch=arch, checkpoint=path, **kwargs)

    def train(self, mode: bool = True) -> 'JetViTDepthAnything':
        return super().train(mode and not self.frozen)

    def checkpoint_filter_fn(self, state: StateDict, source: str = 'checkpoint') -> StateDict:
        """The key map of :func:`~jetvit_mm.models.checkpoint.apply_checkpoint`: any :func:`depth_state` format."""
        return depth_state(state, source)[0]

    def load_checkpoint(self, path: Union[str, Path]) -> None:
        """Strictly load backbone and head from ``path``."""
        apply_checkpoint(self, read(path))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised images ``[B, 3, H, W]`` (H, W multiples of 14) -> disparity ``[B, H, W]``."""
        features = self.backbone.forward_intermediates(x, norm=True, output_fmt='NCHW')
        return self.depth_head(features).squeeze(1)

    @torch.no_grad()
    def infer(self, images: torch.Tensor) -> torch.Tensor:
        """RGB images in [0, 1] of any size ``[B, 3, H, W]`` -> disparity ``[B, H, W]`` at the same size."""
        x = preprocess_depth_anything(images, self.input_size, self.backbone.patch_size)
        disparity = self(x)
        return F.interpolate(disparity[:, None], images.shape[-2:], mode='bilinear', align_corners=True)[:, 0]


def mmseg_checkpoint(checkpoint: Checkpoint) -> dict:
    """``checkpoint`` (an official DepthAnythingV2 file, or any :func:`depth_state` format) as the
    checkpoint of an mmseg ``DepthEstimator`` with a JetViT backbone and a ``DPTDepthHead``: ``{'state_dict':
    {backbone.* (JetViT names, the saved spec with them), decode_head.* (original head names)}, 'meta': ...}``."""
    state, fmt = depth_state(checkpoint.state, str(checkpoint.path), 'decode_head.')
    return dict(state_dict=state, meta=dict(checkpoint.meta, source=str(checkpoint.path), source_format=fmt))


def export_mmseg_checkpoint(src: Union[str, Path], dst: Union[str, Path]) -> Path:
    """Write ``src`` as :func:`mmseg_checkpoint` to ``dst`` (what ``tools/test.py CONFIG CHECKPOINT`` and
    ``tools/search.py --head-checkpoint`` read)."""
    return save(mmseg_checkpoint(read(src)), dst)
