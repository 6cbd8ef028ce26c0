"""Pictures side by side, each under a line of text (a model's name and latency), and colour maps of value maps."""
from typing import Optional, Sequence, Tuple

import cv2
import numpy as np

__all__ = ['HEADER_PX', 'colour_map', 'labelled_row']

HEADER_PX = 18  # the height of the text band above every panel


def colour_map(values: np.ndarray, cmap: str = 'Spectral_r', lo: Optional[float] = None,
               hi: Optional[float] = None) -> np.ndarray:
    """``values`` (H x W) through a matplotlib colour map, ``lo..hi`` (default: its own min..max) -> 0..1: RGB
    uint8. Give two maps the same ``lo`` and ``hi`` to show them on one scale."""
    from matplotlib import colormaps

    lo = float(values.min()) if lo is None else lo
    hi = float(values.max()) if hi is None else hi
    scaled = np.clip((values - lo) / (hi - lo), 0, 1) if hi > lo else np.zeros_like(values, dtype=np.float64)
    return (colormaps[cmap](scaled)[..., :3] * 255).astype(np.uint8)


def _header(text: str, width: int) -> np.ndarray:
    """A black band ``width`` wide with ``text`` in white, shrunk to fit."""
    band = np.zeros((HEADER_PX, width, 3), np.uint8)
    font, scale = cv2.FONT_HERSHEY_SIMPLEX, 0.45
    while scale > 0.2 and cv2.getTextSize(text, font, scale, 1)[0][0] > width - 4:
        scale -= 0.05
    cv2.putText(band, text, (2, HEADER_PX - 5), font, scale, (255, 255, 255), 1, cv2.LINE_AA)
    return band


def labelled_row(panels: Sequence[Tuple[np.ndarray, str]]) -> np.ndarray:
    """RGB panels of one height side by side, each under its text: one RGB uint8 image ``HEADER_PX`` taller."""
    heights = {image.shape[0] for image, _ in panels}
    if len(heights) != 1:
        raise ValueError(f'panels of different heights {sorted(heights)}')
    columns = [np.concatenate([_header(text, image.shape[1]), image.astype(np.uint8)], 0) for image, text in panels]
    return np.concatenate(columns, 1)
