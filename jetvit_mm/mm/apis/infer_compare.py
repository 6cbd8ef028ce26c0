"""``tools/infer.py --compare TEACHER_CKPT`` and ``--pca``: a teacher and the hybrid on the same images, side by side.

Per image: ``<stem>_compare.png`` = [image | teacher | hybrid | difference] (segmentation: class colours and the
pixels whose class differs; depth: both disparities on one colour scale and |teacher - hybrid| as a heat map), with
each model's latency on it; ``<stem>_pca.png`` = the backbone's last-level patch features as RGB (teacher | hybrid,
one PCA basis fitted on the teacher's features); ``compare.json`` with the latencies, the difference figures and the
features' mean cosine similarity. The hybrid's usual outputs (:func:`~jetvit_mm.mm.apis.infer.write_prediction`) are
written too.

The teacher is built from the hybrid's config with the backbone arch its checkpoint's spec names, and checked to
fit as the hybrid is (:func:`~jetvit_mm.mm.apis.infer.load_model`).
"""
import copy
import functools
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import cv2
import numpy as np
import torch
from mmengine.config import Config

from jetvit_mm.benchmark.timing import summarize, time_interleaved
from jetvit_mm.models.checkpoint import Checkpoint, read
from jetvit_mm.visual import colour_map, fit_pca, labelled_row, mean_cosine, pca_colours

from ..checkpoint import without_backbone_checkpoint
from .infer import (
    check_outputs_free,
    collect_images,
    inference_pipeline,
    load_model,
    output_stems,
    outputs_of,
    palette_of,
    read_image,
    read_weights,
    task_outputs,
    write_image,
    write_prediction,
)

__all__ = ['load_teacher', 'run_compare', 'teacher_config']


def teacher_config(cfg: Config, checkpoint: Union[str, Checkpoint]) -> Config:
    """``cfg`` with the backbone arch that ``checkpoint``'s saved spec names (all F for a teacher's downstream
    checkpoint; a path, or read already) and no weights file of its own; ``cfg`` unchanged where the checkpoint names
    no arch."""
    spec = read(checkpoint, mmap=True).spec
    cfg = without_backbone_checkpoint(cfg)
    backbone = cfg.model.get('backbone')
    if spec is not None and spec.arch is not None and isinstance(backbone, dict):
        backbone['arch'] = spec.arch
    return cfg


def load_teacher(cfg: Config, checkpoint: str, device: str = 'cpu'):
    """The model of :func:`teacher_config` with ``checkpoint``'s weights; ValueError naming ``checkpoint`` when it
    does not fit (another arch length, missing or mis-shaped keys), as for the hybrid's checkpoint."""
    try:
        weights = read_weights(checkpoint)
        return load_model(teacher_config(cfg, weights), weights, device)
    except ValueError as error:
        if str(error).startswith(str(checkpoint)):
            raise
        raise ValueError(f'{checkpoint} does not fit the model of {cfg.filename}: {error}') from None


def prepare(model, image: np.ndarray, name: Optional[str] = None) -> Dict[str, list]:
    """``image`` (BGR) through ``model``'s test pipeline: the batch of one that ``model.test_step`` takes; an OpenCV
    error of a step names ``name`` (the file), the image's size and the step."""
    item = inference_pipeline(model, name)(dict(img=image))
    return dict(inputs=[item['inputs']], data_samples=[item['data_samples']])


def patch_features(model, data: Dict[str, list]) -> Tuple[torch.Tensor, Tuple[float, float]]:
    """The last level of ``model.backbone``'s outputs for the image of ``data``, cut to the patches that cover the
    image (not the padding): C x h x w, and the pixels per patch (rows, columns) of the model's input."""
    with torch.no_grad():
        batch = model.data_preprocessor(copy.copy(data), False)
        inputs = batch['inputs']
        features = model.backbone(inputs)[-1][0]
    (height, width), (rows, cols) = inputs.shape[-2:], features.shape[-2:]
    stride = (height / rows, width / cols)
    image_h, image_w = data['data_samples'][0].img_shape[:2]
    cut = features[:, :math.ceil(image_h / stride[0]), :math.ceil(image_w / stride[1])]
    return cut.float().cpu(), stride


def _to_image(colours: np.ndarray, stride: Tuple[float, float], image_shape: Sequence[int],
              size: Sequence[int]) -> np.ndarray:
    """A per-patch RGB map of :func:`patch_features` at the original image size ``size`` (h, w): patches blown up
    to their pixels of the model's input, cut to the image there (``image_shape``), resized back."""
    rows, cols = colours.shape[:2]
    full = cv2.resize(colours, (round(cols * stride[1]), round(rows * stride[0])), interpolation=cv2.INTER_NEAREST)
    full = full[:int(image_shape[0]), :int(image_shape[1])]
    return cv2.resize(full, (int(size[1]), int(size[0])), interpolation=cv2.INTER_NEAREST)


def _pca_picture(features: Dict[str, Tuple[torch.Tensor, Tuple[float, float]]], image_shape: Sequence[int],
                 size: Sequence[int]) -> np.ndarray:
    """The PCA map of each model's features with one basis fitted on the first's (the teacher's, when given)."""
    basis = fit_pca(next(iter(features.values()))[0])
    return labelled_row([(_to_image(pca_colours(f, basis), stride, image_shape, size), f'{name} features (PCA)')
                         for name, (f, stride) in features.items()])


def _segmentation_panels(image: np.ndarray, samples: Dict[str, Any], ms: Dict[str, float],
                         palette: Sequence[Sequence[int]]):
    colours = np.asarray(palette, dtype=np.uint8).reshape(-1, 3)
    classes = {name: s.pred_sem_seg.data[0].cpu().numpy() for name, s in samples.items()}
    differs = classes['teacher'] != classes['hybrid']
    share = float(differs.mean())
    mask = np.repeat((0.35 * cv2.cvtColor(image, cv2.COLOR_BGR2GRAY))[..., None], 3, 2).astype(np.uint8)
    mask[differs] = (255, 64, 64)
    panels = [(image[..., ::-1], 'image')]
    panels += [(colours[np.minimum(classes[n], len(colours) - 1)], f'{n} {ms[n]:.1f} ms') for n in classes]
    panels.append((mask, f'class differs: {100 * share:.1f}%'))
    return panels, dict(class_differs_share=share)


def _depth_panels(image: np.ndarray, samples: Dict[str, Any], ms: Dict[str, float]):
    disparity = {name: s.pred_depth_map.data[0].float().cpu().numpy().astype(np.float64)
                 for name, s in samples.items()}
    teacher, hybrid = disparity['teacher'], disparity['hybrid']
    lo, hi = min(teacher.min(), hybrid.min()), max(teacher.max(), hybrid.max())
    diff = np.abs(teacher - hybrid)
    nonzero = np.abs(teacher) > 0
    figures = dict(disparity_abs_diff_mean=float(diff.mean()), disparity_abs_diff_max=float(diff.max()),
                   disparity_rel_diff_mean=float((diff[nonzero] / np.abs(teacher[nonzero])).mean())
                   if nonzero.any() else None)
    panels = [(image[..., ::-1], 'image')]
    panels += [(colour_map(disparity[n], lo=lo, hi=hi), f'{n} {ms[n]:.1f} ms') for n in disparity]
    panels.append((colour_map(diff, 'inferno', lo=0.), f'|diff| max {figures["disparity_abs_diff_max"]:.3g}'))
    return panels, figures


def _write_rgb(path: Path, rgb: np.ndarray) -> Path:
    return write_image(path, np.ascontiguousarray(rgb[..., ::-1]))


def planned_outputs(stems: Sequence[Path], suffixes: Sequence[str], out_dir: Path, compare: bool,
                    pca: bool) -> List[Path]:
    """Every file :func:`run_compare` writes: per stem the prediction's ``suffixes``, ``_compare.png`` (``compare``)
    and ``_pca.png`` (``pca``); ``compare.json`` (``compare``)."""
    extra = (('_compare.png', ) if compare else ()) + (('_pca.png', ) if pca else ())
    files = [f for stem in stems for f in outputs_of(stem, (*suffixes, *extra))]
    return files + ([Path(out_dir) / 'compare.json'] if compare else [])


def run_compare(config: Optional[str], checkpoint: Optional[str], inputs: Sequence[str], out_dir: Path,
                teacher_checkpoint: Optional[str] = None, pca: bool = False, device: str = 'cpu',
                warmup: int = 1, repeat: int = 3, overwrite: bool = False) -> List[Dict[str, Path]]:
    """The hybrid (``config`` + ``checkpoint``; ``config`` None: the one ``checkpoint`` carries) on every image of
    ``inputs``, one at a time: its usual outputs, and with ``teacher_checkpoint`` the comparison with the teacher
    (panels and ``compare.json``), with ``pca`` the PCA map of the features; returns the written paths. Outputs are
    named and checked as :func:`~jetvit_mm.mm.apis.infer.run_inference` names and checks them (``overwrite``)."""
    paths = collect_images(inputs)
    out_dir = Path(out_dir)
    stems = output_stems(paths, out_dir)
    hybrid = load_model(config, checkpoint, device)
    check_outputs_free(planned_outputs(stems, task_outputs(hybrid), out_dir, teacher_checkpoint is not None, pca),
                       paths, overwrite)
    models = {'hybrid': hybrid}
    if teacher_checkpoint is not None:
        models = {'teacher': load_teacher(hybrid.cfg, teacher_checkpoint, device), 'hybrid': hybrid}
    palette = palette_of(hybrid)
    out_dir.mkdir(parents=True, exist_ok=True)
    written, records = [], []
    for path, stem in zip(paths, stems):
        image = read_image(path)
        data = {name: prepare(model, image, str(path)) for name, model in models.items()}
        samples: Dict[str, Any] = {}
        calls = {name: functools.partial(_predict, model, data[name], samples, name) for name, model in models.items()}
        timed = summarize(time_interleaved(calls, warmup, repeat, device))
        ms = {name: t['median_ms'] for name, t in timed.items()}
        files = dict(write_prediction(samples['hybrid'], image, stem, palette))
        record: Dict[str, Any] = dict(image=str(path), size=list(image.shape[:2]), latency_ms=timed)
        if teacher_checkpoint is not None:
            if 'pred_depth_map' in samples['hybrid']:
                panels, figures = _depth_panels(image, samples, ms)
            else:
                panels, figures = _segmentation_panels(image, samples, ms, palette)
            record.update(figures)
            files['compare'] = _write_rgb(outputs_of(stem, ('_compare.png', ))[0], labelled_row(panels))
        if pca:
            features = {name: patch_features(model, data[name]) for name, model in models.items()}
            image_shape = data['hybrid']['data_samples'][0].img_shape[:2]
            files['pca'] = _write_rgb(outputs_of(stem, ('_pca.png', ))[0],
                                      _pca_picture(features, image_shape, image.shape[:2]))
            if teacher_checkpoint is not None:
                record['feature_cosine_mean'] = mean_cosine(features['teacher'][0], features['hybrid'][0])
        records.append(record)
        written.append(files)
    if teacher_checkpoint is not None:
        report = dict(hybrid=str(checkpoint), teacher=str(teacher_checkpoint),
                      config=str(config) if config is not None else f'{checkpoint} (meta["cfg"], literal-only)',
                      latency=dict(how=_timing_note(warmup, repeat, device), warmup=warmup, repeat=repeat,
                                   device=str(device), torch_threads=torch.get_num_threads()),
                      images=records)
        (out_dir / 'compare.json').write_text(json.dumps(report, indent=2))
    return written


def _predict(model, data: Dict[str, list], into: Dict[str, Any], name: str) -> None:
    """One timed call: ``model.test_step`` on ``data``, its sample kept in ``into[name]``."""
    with torch.no_grad():
        into[name] = model.test_step(data)[0]


def _timing_note(warmup: int, repeat: int, device: str) -> str:
    return (f'per image, median of {repeat} timed calls after {warmup} warm-up round(s), teacher and hybrid '
            f'interleaved (jetvit_mm.benchmark.timing.time_interleaved; {device}, batch 1, fp32); a call is '
            f'model.test_step on the image after the test pipeline: the data preprocessor (normalise, pad), the '
            f'network and the resize of its output to the image size; reading the file and the pipeline are not '
            f'timed')
