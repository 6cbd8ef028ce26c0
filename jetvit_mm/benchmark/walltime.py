"""Wall-time estimates of the pipeline's stages on N GPUs from measured forward times (README's "real data" table).

These are estimates, not measurements: a training iteration is taken as ``batch`` images through the frozen model's
forward plus the trained model's forward and backward (the backward counted as two forwards), every GPU working on
its own ``batch`` (the configs' per-GPU batch) with no data-loading or communication time; an evaluation is its
images through one forward each, split over the GPUs that run it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Sequence

BACKWARD_FORWARDS = 2.0  # a backward pass costs about two forwards (the weights' and the inputs' gradients)


@dataclass(frozen=True)
class StageCost:
    """One stage of the pipeline: ``iters`` training iterations and/or ``eval_images`` evaluated images.

    Times are per image, in ms: ``frozen_ms`` of the models that only run forward in training (the teacher),
    ``trained_ms`` of the model that is trained (0 when only a head trains), ``eval_ms`` of the evaluated model.
    """
    name: str
    config: str
    iters: int = 0
    batch_per_gpu: int = 0
    frozen_ms: float = 0.0
    trained_ms: float = 0.0
    eval_images: int = 0
    eval_gpus: int = 1
    eval_ms: float = 0.0
    note: str = ''


def training_ms_per_iter(stage: StageCost) -> float:
    """Estimated ms of one training iteration of ``stage`` on each GPU."""
    return stage.batch_per_gpu * (stage.frozen_ms + (1.0 + BACKWARD_FORWARDS) * stage.trained_ms)


def stage_hours(stage: StageCost) -> Dict[str, float]:
    """``{'train_h', 'eval_h', 'total_h'}``: the estimated wall time of ``stage`` in hours."""
    if stage.iters < 0 or stage.batch_per_gpu < 0 or stage.eval_images < 0 or stage.eval_gpus < 1:
        raise ValueError(f'stage {stage.name!r}: iterations, batch and images must be >= 0 and eval_gpus >= 1')
    train_h = stage.iters * training_ms_per_iter(stage) / 3.6e6
    eval_h = stage.eval_images / stage.eval_gpus * stage.eval_ms / 3.6e6
    return dict(train_h=train_h, eval_h=eval_h, total_h=train_h + eval_h)


def ms_per_image(rows: Sequence[Mapping], size: str, label: str) -> float:
    """Per-image forward ms at ``size`` of the ``models --json`` row ``label``: its batched throughput when measured
    (``images_per_s``), else its batch-1 median."""
    for row in rows:
        if row.get('size') == size and row.get('label') == label:
            return 1000.0 / row['images_per_s'] if row.get('images_per_s') else float(row['median_ms'])
    found = sorted({(r.get('size'), r.get('label')) for r in rows})
    raise KeyError(f'no row for size {size!r} and label {label!r}; the result has {found}')


def format_table(stages: Sequence[StageCost]) -> List[str]:
    """Markdown rows (header included) of the stages' estimated hours."""
    lines = ['| stage | config | iterations x batch/GPU | training | evaluation | total |',
             '|---|---|---:|---:|---:|---:|']
    total = 0.0
    for stage in stages:
        h = stage_hours(stage)
        total += h['total_h']
        work = f'{stage.iters} x {stage.batch_per_gpu}' if stage.iters else '-'
        evaluation = f"{h['eval_h']:.2f} h ({stage.eval_images} images)" if stage.eval_images else '-'
        lines.append(f"| {stage.name}{' (' + stage.note + ')' if stage.note else ''} | `{stage.config}` | {work} | "
                     f"{h['train_h']:.2f} h | {evaluation} | {h['total_h']:.2f} h |")
    lines.append(f'| **all stages** | | | | | **{total:.1f} h** |')
    return lines
