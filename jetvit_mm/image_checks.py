"""An image file's size read from its header, checked before it is decoded: OpenCV (``cv2.imread``, mmcv's loaders)
refuses an image above its limits with a bare assertion that names no file, after reading it; here the error names
the file, its size and the limit. Pure: PIL only (no mm imports)."""
import os
import struct
import warnings
from pathlib import Path
from typing import Optional, Tuple, Union

from PIL import Image

__all__ = ['ImageSizeError', 'check_image_file', 'decode_limits', 'header_size']

PathLike = Union[str, Path]


class ImageSizeError(ValueError):
    """An image whose size cannot be used: above the decoder's limits, or too small for a pipeline."""


def decode_limits() -> Tuple[int, int]:
    """``(max pixels, max side)`` OpenCV decodes: its ``OPENCV_IO_MAX_IMAGE_PIXELS`` (default 2^30) and
    ``OPENCV_IO_MAX_IMAGE_WIDTH`` / ``_HEIGHT`` (default 2^20), read from the environment as OpenCV reads them."""
    def env(name: str, default: int) -> int:
        try:
            return int(os.environ.get(name, default))
        except ValueError:
            return default

    side = min(env('OPENCV_IO_MAX_IMAGE_WIDTH', 1 << 20), env('OPENCV_IO_MAX_IMAGE_HEIGHT', 1 << 20))
    return env('OPENCV_IO_MAX_IMAGE_PIXELS', 1 << 30), side


def _size_without_bomb_check(path: PathLike) -> Optional[Tuple[int, int]]:
    """``(width, height)`` from the header of ``path`` by the first PIL format plugin that takes it, as
    ``Image.open`` finds it but without its decompression-bomb error (the size is wanted here, to be checked
    against the decoder's own limits); None when no plugin takes it."""
    Image.init()
    with open(path, 'rb') as f:
        prefix = f.read(16)
        for name in Image.ID:
            factory, accept = Image.OPEN[name]
            taken = not accept or accept(prefix)
            if taken and not isinstance(taken, str):
                f.seek(0)
                try:
                    return tuple(factory(f, str(path)).size)
                except (SyntaxError, IndexError, TypeError, ValueError, struct.error):
                    continue
    return None


def header_size(path: PathLike) -> Optional[Tuple[int, int]]:
    """``(height, width)`` that the header of the image file ``path`` claims, without decoding its pixels; None when
    PIL does not know the format (the decoder then says what it says)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', Image.DecompressionBombWarning)
            with Image.open(path) as image:
                width, height = image.size
    except Image.DecompressionBombError:  # above PIL's own limit: read the size without it
        size = _size_without_bomb_check(path)
        if size is None:
            return None
        width, height = size
    except (OSError, SyntaxError, ValueError):  # not an image PIL knows, or broken: left to the decoder
        return None
    return height, width


def check_image_file(path: PathLike) -> Optional[Tuple[int, int]]:
    """``(height, width)`` of the image file ``path`` from its header (None: a format PIL does not read);
    :class:`ImageSizeError` naming the file, its size and the limit when OpenCV would refuse to decode it (more
    pixels, or a longer side, than :func:`decode_limits`) or a side is empty."""
    size = header_size(path)
    if size is None:
        return None
    height, width = size
    max_pixels, max_side = decode_limits()
    if height * width > max_pixels or max(height, width) > max_side:
        raise ImageSizeError(f'{path}: its header claims {height}x{width} pixels (height x width, {height * width} in '
                             f'all); the image decoder (OpenCV) reads at most {max_pixels} pixels and {max_side} per '
                             f'side (OPENCV_IO_MAX_IMAGE_PIXELS, _WIDTH, _HEIGHT): a damaged or hostile file, or an '
                             f'image to tile or downscale first')
    if min(height, width) < 1:
        raise ImageSizeError(f'{path}: its header claims {height}x{width} pixels (height x width): an image needs at '
                             f'least 1 pixel per side')
    return size
