"""Images -> results with a config and a checkpoint: the logic of ``tools/infer.py``.

Segmentation writes a palette PNG of the classes and an overlay on the image; depth writes a colour-mapped PNG of
the disparity, its raw values as ``.npy`` and a 16-bit PNG (the disparity scaled to 0..65535 per image; the scale
is in the ``.npy``'s values). Models run through mmseg's ``init_model`` / ``inference_model`` (any image size: the
configs pad test images to the patch grid), in batches. The config may be left out when the checkpoint carries
one (:func:`~jetvit_mm.mm.checkpoint.config_of_checkpoint`). ``--compare`` and ``--pca`` are
:mod:`jetvit_mm.mm.apis.infer_compare`.

Output names never collide (:func:`output_stems`: each input's path below the inputs' common folder) and no file is
overwritten that this run did not write (:func:`check_outputs_free`: refused before any image is read, unless
``overwrite``; an input image of the run is never overwritten).
"""
import copy
import glob
import os.path as osp
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

import cv2
import numpy as np

from jetvit_mm.image_checks import check_image_file
from jetvit_mm.visual import colour_map

IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')
ANNOTATION_LOADERS = ('LoadAnnotations', 'LoadDepthAnnotation', 'LoadZeroShotDepth')
SEGMENTATION_OUTPUTS = ('_seg.png', '_overlay.png')  # what write_segmentation / write_depth add to a stem
DEPTH_OUTPUTS = ('_depth.png', '_disparity.npy', '_disparity16.png')


def collect_images(inputs: Sequence[str]) -> List[Path]:
    """Image files from paths, folders (their images, sorted) and glob patterns, each file once (in the order first
    found); ValueError when one gives none."""
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
    seen: set = set()
    return [p for p in found if not (p.resolve() in seen or seen.add(p.resolve()))]


def output_stems(paths: Sequence[Path], out_dir: Path) -> List[Path]:
    """Where the outputs of each of ``paths`` go (``<stem>_seg.png``, ...), no two alike: ``out_dir`` / the input's
    path below the inputs' common folder, without its suffix (one folder's images: their stems; ``a/x.png`` and
    ``b/x.png``: ``a/x`` and ``b/x``). Inputs that would still share a stem (``x.png``, ``x.jpg``) keep their suffix
    in it (``x_png``, ``x_jpg``), and a name taken already gets a number (``x_png_2``)."""
    absolute = [Path(osp.normpath(p.absolute())) for p in paths]
    if not absolute:
        return []
    common = Path(osp.commonpath([str(p.parent) for p in absolute]))
    keys = [p.relative_to(common).with_suffix('').as_posix() for p in absolute]
    shared = Counter(keys)
    keys = [f'{k}_{p.suffix[1:]}' if shared[k] > 1 and p.suffix else k for k, p in zip(keys, absolute)]
    used: set = set()
    stems = []
    for key in keys:
        unique, number = key, 1
        while unique in used:
            number += 1
            unique = f'{key}_{number}'
        used.add(unique)
        stems.append(Path(out_dir) / unique)
    return stems


def outputs_of(stem: Path, suffixes: Sequence[str]) -> List[Path]:
    """The files ``stem`` + each of ``suffixes`` (``img0`` + ``_seg.png``)."""
    return [stem.with_name(stem.name + suffix) for suffix in suffixes]


def task_outputs(model) -> Sequence[str]:
    """What a prediction of ``model`` writes per image: :data:`DEPTH_OUTPUTS` for a depth estimator, else
    :data:`SEGMENTATION_OUTPUTS`."""
    from mmseg.models.segmentors import DepthEstimator

    return DEPTH_OUTPUTS if isinstance(model, DepthEstimator) else SEGMENTATION_OUTPUTS


def check_outputs_free(outputs: Iterable[Path], inputs: Sequence[Path], overwrite: bool = False) -> None:
    """Refuse, before any work, to write where this run did not write: ValueError naming an output that is one of
    the run's ``inputs`` (never replaced), that is a folder, or that exists already (unless ``overwrite``)."""
    images = {p.resolve() for p in inputs}
    existing = []
    for path in outputs:
        if path.resolve() in images:
            raise ValueError(f'the output {path} would replace an input image of this run; choose another --out-dir')
        if path.is_dir():
            raise ValueError(f'the output {path} is an existing folder; move it, or choose another --out-dir')
        if path.exists() or path.is_symlink():
            existing.append(path)
    if existing and not overwrite:
        more = f' and {len(existing) - 3} more' if len(existing) > 3 else ''
        shown = ', '.join(str(p) for p in existing[:3]) + more
        raise ValueError(f'{len(existing)} output file(s) exist already and were not written by this run: {shown}; '
                         f'pass --overwrite to replace them, or choose another --out-dir')


def write_image(path: Path, image: np.ndarray) -> Path:
    """``cv2.imwrite`` of ``image`` to ``path`` (its folder created); OSError naming ``path`` when it fails (OpenCV
    only returns False)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), image):
        raise OSError(f'could not write {path}')
    return path


def read_image(path: Path) -> np.ndarray:
    """The image at ``path`` (BGR uint8, as mmcv reads it); ValueError naming the file when it cannot be read, or
    when its header claims a size the decoder refuses (:func:`~jetvit_mm.image_checks.check_image_file`, checked
    before decoding)."""
    check_image_file(path)
    try:
        image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    except cv2.error as error:
        raise ValueError(f'cannot read {path} as an image (OpenCV: {" ".join(str(error).split())})') from None
    if image is None:
        raise ValueError(f'cannot read {path} as an image (corrupt, or not an image format OpenCV reads)')
    return image


def read_weights(checkpoint):
    """``checkpoint`` (a path, or read already) read once, whole and checked (:func:`~jetvit_mm.models.checkpoint.read`:
    weights only, its CRCs and tensor digest), in the layout a config's model loads: an official DepthAnythingV2 file
    (``pretrained.*`` + ``depth_head.*``) as the mmseg depth estimator's (what tools/convert_depth_anything.py
    writes)."""
    from jetvit_mm.models.checkpoint import Checkpoint, read
    from jetvit_mm.models.depth_anything import mmseg_checkpoint

    checkpoint = read(checkpoint)
    keys = checkpoint.state.keys()
    if any(k.startswith('pretrained.') for k in keys) and any(k.startswith('depth_head.') for k in keys):
        return Checkpoint(checkpoint.path, mmseg_checkpoint(checkpoint), checkpoint.meta)
    return checkpoint


def load_model(config, checkpoint=None, device: str = 'cpu'):
    """mmseg's ``init_model`` (``config``: a file or a :class:`~mmengine.config.Config`; None: the one ``checkpoint``
    carries, read literal-only, never run) with ``checkpoint``'s weights (a path, or read already:
    :func:`read_weights`) applied strictly (:func:`~jetvit_mm.models.checkpoint.apply_checkpoint`: missing or
    mis-shaped keys and another arch are an error naming them, not mmengine's warning; keys beyond the model, a
    distiller's ``teacher.*``, left out), and a test pipeline without the annotation loaders."""
    from mmseg.apis import init_model

    from jetvit_mm.models.checkpoint import apply_checkpoint

    from ..checkpoint import config_of_checkpoint

    weights = None if checkpoint is None else read_weights(checkpoint)
    if config is None and weights is None:
        raise ValueError('without a config, a checkpoint that carries one is needed: tools/infer.py CHECKPOINT '
                         'IMAGES... or tools/infer.py CONFIG CHECKPOINT IMAGES...')
    config = config_of_checkpoint(weights) if config is None else config
    model = init_model(config if isinstance(config, (str, Path)) else copy.deepcopy(config), None, device=device)
    if weights is not None:
        name = config if isinstance(config, (str, Path)) else config.filename
        apply_checkpoint(model, weights, allow_unexpected=True, target=f'the model of {name}')
        if weights.meta.get('dataset_meta'):
            model.dataset_meta = weights.meta['dataset_meta']
    model.cfg.test_pipeline = [t for t in model.cfg.test_pipeline if t['type'] not in ANNOTATION_LOADERS]
    preprocessor, patch = model.data_preprocessor, getattr(model.backbone, 'patch_size', None)
    if patch and not (getattr(preprocessor, 'test_cfg', None) or {}).get('size_divisor'):
        preprocessor.test_cfg = dict(preprocessor.test_cfg or {}, size_divisor=patch)  # any image size
    return model.eval()


def inference_pipeline(model, name: Optional[str] = None):
    """``model``'s test pipeline for an image in memory (``dict(img=BGR array)``), as a
    :class:`~jetvit_mm.mm.datasets.image_pipeline.CheckedPipeline` whose errors name ``name``."""
    from mmengine.dataset import Compose

    from ..datasets.image_pipeline import CheckedPipeline

    steps = copy.deepcopy(list(model.cfg.test_pipeline))
    steps[0] = dict(steps[0], type='LoadImageFromNDArray')
    return CheckedPipeline(Compose(steps).transforms, name)


def predict(model, images: List[np.ndarray], batch: int, names: Optional[Sequence[str]] = None) -> list:
    """mmseg data samples for ``images`` in their order, ``batch`` images of one size at a time (mmseg's test-time
    preprocessor stacks only equal sizes); an OpenCV error of the test pipeline names the image (``names``), its
    size and the step."""
    from mmseg.apis import inference_model

    out: list = [None] * len(images)
    by_size: Dict[tuple, List[int]] = {}
    for i, image in enumerate(images):
        by_size.setdefault(image.shape, []).append(i)
    for indices in by_size.values():
        for start in range(0, len(indices), batch):
            chunk = indices[start:start + batch]
            try:
                result = inference_model(model, [images[i] for i in chunk])
            except cv2.error:  # which step, on which image: the same pipeline again, its error named
                inference_pipeline(model, names[chunk[0]] if names else None)(dict(img=images[chunk[0]]))
                raise
            for i, sample in zip(chunk, result if isinstance(result, list) else [result]):
                out[i] = sample
    return out


def write_depth(sample, image: np.ndarray, stem: Path) -> Dict[str, Path]:
    """``<stem>_depth.png`` (colour map), ``<stem>_disparity.npy`` (raw), ``<stem>_disparity16.png`` (16-bit)."""
    disparity = sample.pred_depth_map.data[0].float().cpu().numpy()
    paths = dict(zip(('colour', 'raw', 'png16'), outputs_of(stem, DEPTH_OUTPUTS)))
    write_image(paths['colour'], colour_map(disparity)[..., ::-1])
    np.save(paths['raw'], disparity.astype(np.float32))
    lo, hi = float(disparity.min()), float(disparity.max())
    scaled = (disparity - lo) / (hi - lo) if hi > lo else np.zeros_like(disparity)
    write_image(paths['png16'], np.round(scaled * 65535).astype(np.uint16))
    return paths


def write_segmentation(sample, image: np.ndarray, stem: Path, palette: Sequence[Sequence[int]]) -> Dict[str, Path]:
    """``<stem>_seg.png`` (a palette PNG of the class ids) and ``<stem>_overlay.png`` (half image, half colour)."""
    from PIL import Image

    classes = sample.pred_sem_seg.data[0].cpu().numpy().astype(np.uint8)
    colours = np.asarray(palette, dtype=np.uint8).reshape(-1, 3)
    paths = dict(zip(('seg', 'overlay'), outputs_of(stem, SEGMENTATION_OUTPUTS)))
    seg = Image.fromarray(classes, mode='P')
    seg.putpalette(colours.flatten().tolist() + [0] * (768 - colours.size))
    paths['seg'].parent.mkdir(parents=True, exist_ok=True)
    seg.save(paths['seg'])
    overlay = (0.5 * image[..., ::-1] + 0.5 * colours[np.minimum(classes, len(colours) - 1)]).astype(np.uint8)
    write_image(paths['overlay'], overlay[..., ::-1])
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
                  batch: int = 4, device: str = 'cpu', progress: bool = True,
                  overwrite: bool = False) -> List[Dict[str, Path]]:
    """Predict every image of ``inputs`` and write the results into ``out_dir`` (named by :func:`output_stems`;
    existing files refused by :func:`check_outputs_free` unless ``overwrite``); returns the written paths.
    ``config`` None: the config ``checkpoint`` carries."""
    from tqdm import tqdm

    paths = collect_images(inputs)
    out_dir = Path(out_dir)
    stems = output_stems(paths, out_dir)
    model = load_model(config, checkpoint, device)
    suffixes = task_outputs(model)
    check_outputs_free([f for stem in stems for f in outputs_of(stem, suffixes)], paths, overwrite)
    palette = palette_of(model)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    bar = tqdm(total=len(paths), unit='image', disable=not progress or len(paths) < 2 * batch)
    for start in range(0, len(paths), batch):
        chunk = paths[start:start + batch]
        images = [read_image(p) for p in chunk]
        samples = predict(model, images, batch, [str(p) for p in chunk])
        for stem, image, sample in zip(stems[start:start + batch], images, samples):
            written.append(write_prediction(sample, image, stem, palette))
        bar.update(len(chunk))
    bar.close()
    return written


def _default_palette() -> List[List[int]]:
    rng = np.random.default_rng(0)
    return rng.integers(0, 255, (256, 3)).tolist()
