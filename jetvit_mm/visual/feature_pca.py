"""A PCA colour map of patch features: the 3 principal components of one feature map as RGB.

The basis (mean, components, per-component range) is fitted on one map and applied unchanged to another, so equal
colours in the two pictures mean equal features (the teacher's basis for the hybrid's features).
"""
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ['PCABasis', 'fit_pca', 'mean_cosine', 'pca_colours']


@dataclass(frozen=True)
class PCABasis:
    """What projects C-dim features to RGB: ``(x - mean) @ components``, then ``lo..hi`` per component -> 0..1."""
    mean: torch.Tensor  # (C,)
    components: torch.Tensor  # (C, 3)
    lo: torch.Tensor  # (3,)
    hi: torch.Tensor  # (3,)


def _tokens(features: torch.Tensor) -> torch.Tensor:
    """(C, H, W) -> (H*W, C) float64 (a stable SVD, and the same result on every run)."""
    if features.dim() != 3:
        raise ValueError(f'expected one C x H x W feature map, got shape {tuple(features.shape)}')
    return features.detach().double().cpu().flatten(1).T


def fit_pca(features: torch.Tensor, clip: float = 0.01) -> PCABasis:
    """The basis of the 3 principal components of ``features`` (C x H x W), each scaled so that its ``clip`` and
    ``1 - clip`` quantiles map to 0 and 1. The sign of each component is fixed (its largest loading positive),
    so a basis does not flip between runs."""
    x = _tokens(features)
    mean = x.mean(0)
    _, _, vh = torch.linalg.svd(x - mean, full_matrices=False)
    components = vh[:3].T
    if components.shape[1] < 3:  # fewer than 3 channels or tokens: pad with zero components
        components = torch.cat([components, components.new_zeros(components.shape[0], 3 - components.shape[1])], 1)
    signs = torch.sign(components.gather(0, components.abs().argmax(0, keepdim=True)))
    components = components * torch.where(signs == 0, torch.ones_like(signs), signs)
    projected = (x - mean) @ components
    lo, hi = torch.quantile(projected, clip, dim=0), torch.quantile(projected, 1 - clip, dim=0)
    return PCABasis(mean, components, lo, hi)


def pca_colours(features: torch.Tensor, basis: PCABasis) -> np.ndarray:
    """``features`` (C x H x W) projected with ``basis``: an H x W x 3 RGB uint8 image."""
    _, h, w = features.shape
    projected = (_tokens(features) - basis.mean) @ basis.components
    span = torch.where(basis.hi > basis.lo, basis.hi - basis.lo, torch.ones_like(basis.hi))
    scaled = ((projected - basis.lo) / span).clamp(0, 1)
    return (scaled.reshape(h, w, 3).numpy() * 255).round().astype(np.uint8)


def mean_cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """The mean over positions of the cosine similarity of two C x H x W feature maps (1: the same directions)."""
    if a.shape != b.shape:
        raise ValueError(f'feature maps of different shapes: {tuple(a.shape)} vs {tuple(b.shape)}')
    return float(torch.nn.functional.cosine_similarity(_tokens(a), _tokens(b), dim=1).mean())
