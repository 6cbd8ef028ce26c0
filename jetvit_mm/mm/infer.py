"""Images -> results with a config and a checkpoint: the logic of ``tools/infer.py``.

Segmentation writes a palette PNG of the classes and an overlay on the image; depth writes a colour-mapped PNG of
the disparity, its raw values as ``.npy`` and a 16-bit PNG (the disparity scaled to 0..65535 per image; the scale
is in the ``.npy``'s values). Models run through mmseg's ``init_model`` / ``inference_model`` (any image size: the
configs pad test images to the patch grid), in batches. The config may be left out when the checkpoint carries
one (:func:`~jetvit_mm.mm.saved_config.config_of_checkpoint`). ``--compare`` and ``--pca`` are
:mod:`jetvit_mm.mm.infer_compare`.
"""
import copy
import glob
import os.path as osp
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import cv2
import numpy as np

from jetvit_mm.visual import colour_map

IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')
ANNOTATION_LOADERS = ('LoadAnnotations', 'LoadDepthAnnotation', 'LoadZeroShotDepth')


def collect_images(inputs: Sequence[str]) -> List[Path]:
    """Image files from paths, folders (their images, sorted) and glob patterns; ValueError when one gives none."""
    found: List[Path] = []
    for item in inputs:
        path = Path(item).expanduser()
        if path.is_dir():
            images = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            if not images:
                raise ValueError(f'{path} holds no images ({", ".join(IMAGE_SUFFIXES)})')
        elif path.is_file():
            images = [path]
        else:
            images = sorted(Path(p) for p in glob.glob(osp.expanduser(item), recursive=True)
                            if Path(p).suffix.lower() in IMAGE_SUFFIXES)
            if not images:
                raise ValueError(f'{item} is no file or folder, and as a glob matches no images')
        found.extend(images)
    return found


def read_image(path: Path) -> np.ndarray:
    """The image at ``path`` (BGR uint8, as mmcv reads it); ValueError naming the file when it cannot be read."""
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError(f'cannot read {path} as an image (corrupt, or not an image format OpenCV reads)')
    return image


def resolve_config(config: Optional[Union[str, Path]], checkpoint: Optional[str]):
    """``config`` (a file), or with none the config ``checkpoint`` carries (read literal-only, never run)."""
    if config is not None:
        return str(config)
    if checkpoint is None:
        raise ValueError('without a config, a checkpoint that carries one is needed: tools/infer.py CHECKPOINT '
                         'IMAGES... or tools/infer.py CONFIG CHECKPOINT IMAGES...')
    from .saved_config import config_of_checkpoint

    return config_of_checkpoint(checkpoint)


def load_model(config, checkpoint: Optional[str], device: str = 'cpu'):
    """mmseg's ``init_model`` (``config``: a file or a :class:`~mmengine.config.Config`) with the checkpoint checked
    to fit the config's model first (a clear error naming the missing or mis-shaped keys or the other arch, instead
    of mmengine's warning), and a test pipeline without the annotation loaders."""
    from mmengine.runner import load_checkpoint
    from mmseg.apis import init_model

    from .checkpoint import check_checkpoint_fits

    model = init_model(config if isinstance(config, (str, Path)) else copy.deepcopy(config), None, device=device)
    name = config if isinstance(config, (str, Path)) else config.filename
    if checkpoint is not None:
        check_checkpoint_fits(model, checkpoint, str(name))
        loaded = load_checkpoint(model, checkpoint, map_location='cpu', strict=False)
        meta = loaded.get('meta', {}) if isinstance(loaded, dict) else {}
        if meta.get('dataset_meta'):
            model.dataset_meta = meta['dataset_meta']
    model.cfg.test_pipeline = [t for t in model.cfg.test_pipeline if t['type'] not in ANNOTATION_LOADERS]
    preprocessor, patch = model.data_preprocessor, getattr(model.backbone, 'patch_size', None)
    if patch and not (getattr(preprocessor, 'test_cfg', None) or {}).get('size_divisor'):
        preprocessor.test_cfg = dict(preprocessor.test_cfg or {}, size_divisor=patch)  # any image size
    return model.eval()


def predict(model, images: List[np.ndarray], batch: int) -> list:
    """mmseg data samples for ``images`` in their order, ``batch`` images of one size at a time (mmseg's test-time
    preprocessor stacks only equal sizes)."""
    from mmseg.apis import inference_model

    out: list = [None] * len(images)
    by_size: Dict[tuple, List[int]] = {}
    for i, image in enumerate(images):
        by_size.setdefault(image.shape, []).append(i)
    for indices in by_size.values():
        for start in range(0, len(indices), batch):
            chunk = indices[start:start + batch]
            result = inference_model(model, [images[i] for i in chunk])
            for i, sample in zip(chunk, result if isinstance(result, list) else [result]):
                out[i] = sample
    return out


def write_depth(sample, image: np.ndarray, stem: Path) -> Dict[str, Path]:
    """``<stem>_depth.png`` (colour map), ``<stem>_disparity.npy`` (raw), ``<stem>_disparity16.png`` (16-bit)."""
    disparity = sample.pred_depth_map.data[0].float().cpu().numpy()
    paths = {'colour': stem.with_name(stem.name + '_depth.png'), 'raw': stem.with_name(stem.name + '_disparity.npy'),
             'png16': stem.with_name(stem.name + '_disparity16.png')}
    cv2.imwrite(str(paths['colour']), colour_map(disparity)[..., ::-1])
    np.save(paths['raw'], disparity.astype(np.float32))
    lo, hi = float(disparity.min()), float(disparity.max())
    scaled = (disparity - lo) / (hi - lo) if hi > lo else np.zeros_like(disparity)
    cv2.imwrite(str(paths['png16']), np.round(scaled * 65535).astype(np.uint16))
    return paths


def write_segmentation(sample, image: np.ndarray, stem: Path, palette: Sequence[Sequence[int]]) -> Dict[str, Path]:
    """``<stem>_seg.png`` (a palette PNG of the class ids) and ``<stem>_overlay.png`` (half image, half colour)."""
    from PIL import Image

    classes = sample.pred_sem_seg.data[0].cpu().numpy().astype(np.uint8)
    colours = np.asarray(palette, dtype=np.uint8).reshape(-1, 3)
    paths = {'seg': stem.with_name(stem.name + '_seg.png'), 'overlay': stem.with_name(stem.name + '_overlay.png')}
    seg = Image.fromarray(classes, mode='P')
    seg.putpalette(colours.flatten().tolist() + [0] * (768 - colours.size))
    seg.save(paths['seg'])
    overlay = (0.5 * image[..., ::-1] + 0.5 * colours[np.minimum(classes, len(colours) - 1)]).astype(np.uint8)
    cv2.imwrite(str(paths['overlay']), overlay[..., ::-1])
    return paths


def palette_of(model) -> List[List[int]]:
    """The class colours of ``model``'s dataset (its checkpoint's ``dataset_meta``), else fixed random ones."""
    return (getattr(model, 'dataset_meta', None) or {}).get('palette') or _default_palette()


def write_prediction(sample, image: np.ndarray, stem: Path, palette: Sequence[Sequence[int]]) -> Dict[str, Path]:
    """The files of one prediction: :func:`write_depth` or :func:`write_segmentation`."""
    if 'pred_depth_map' in sample:
        return write_depth(sample, image, stem)
    return write_segmentation(sample, image, stem, palette)


def run_inference(config: Optional[str], checkpoint: Optional[str], inputs: Sequence[str], out_dir: Path,
                  batch: int = 4, device: str = 'cpu', progress: bool = True) -> List[Dict[str, Path]]:
    """Predict every image of ``inputs`` and write the results into ``out_dir``; returns the written paths.
    ``config`` None: the config ``checkpoint`` carries."""
    from tqdm import tqdm

    paths = collect_images(inputs)
    model = load_model(resolve_config(config, checkpoint), checkpoint, device)
    palette = palette_of(model)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    bar = tqdm(total=len(paths), unit='image', disable=not progress or len(paths) < 2 * batch)
    for start in range(0, len(paths), batch):
        chunk = paths[start:start + batch]
        images = [read_image(p) for p in chunk]
        for path, image, sample in zip(chunk, images, predict(model, images, batch)):
            written.append(write_prediction(sample, image, out_dir / path.stem, palette))
        bar.update(len(chunk))
    bar.close()
    return written


def _default_palette() -> List[List[int]]:
    rng = np.random.default_rng(0)
    return rng.integers(0, 255, (256, 3)).tolist()
