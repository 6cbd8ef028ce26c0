"""Estimated wall time of each stage of the DINOv3-B Cityscapes pipeline on 8 GPUs (README, "real data").

Reads the iterations and per-GPU batches from the shipped configs and the per-image forward times measured on one
NVIDIA H200 (docs/raw/gpu_h200_2026-11-29/run2_models_fp32.json: fp32, eager, the torch paths, throughput at batch
8), and writes the inputs, the assumptions and the per-stage figures to docs/raw/real_data_estimates_8gpu.json;
prints the markdown table. The figures are estimates, not measurements: a training iteration is taken as ``batch``
images through the frozen model's forward plus the trained model's forward and backward (the backward counted as two
forwards), every GPU working on its own ``batch`` (the configs' per-GPU batch) with no data-loading or communication
time; an evaluation is its images through one forward each, split over the GPUs that run it. No training step has
been timed on a GPU.

    python scripts/real_data_estimates.py [--json docs/raw/real_data_estimates_8gpu.json]
"""
import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the configs' custom_imports name jetvit_mm

GPUS = 8
MEASURED = 'docs/raw/gpu_h200_2026-11-29/run2_models_fp32.json'
PROVENANCE = ('one NVIDIA H200 (143771 MiB, driver 580.159.04), 2026-11-29 23:03 UTC, commit 32f31ec, Python 3.12.3, '
              'torch 2.11.0+cu130, timm 1.0.31; DINOv3-B shapes, random weights, fp32, eager, the torch paths')
VAL_IMAGES = 500  # Cityscapes val
SEARCH_ARCHS = 50  # an assumed number of archs scored per search (search.json lists the real count)
CONFIGS = dict(probe='configs/probe/dinov3_base_linear_cityscapes.py', step1='configs/jetvit/dinov3_base_cityscapes.py',
               step2='configs/jetvit/dinov3_base_cityscapes_step2.py')

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


def schedule(config: str) -> Dict[str, int]:
    """The config's iterations, per-GPU batch and validation interval."""
    from jetvit_mm.mm.engine.launch import read_config
    cfg = read_config(str(REPO / config))
    return dict(iters=int(cfg.train_cfg.max_iters), batch=int(cfg.train_dataloader.batch_size),
                val_interval=int(cfg.train_cfg.get('val_interval') or 0))


def stages() -> List[StageCost]:
    """The pipeline's stages with the configs' schedules and the measured per-image forward times."""
    rows = json.loads((REPO / MEASURED).read_text())['rows']
    crop = {k: ms_per_image(rows, '512x1024', k) for k in ('teacher', '2F', 'all-L', 'all-W')}
    full = {k: ms_per_image(rows, '1024x2048', k) for k in ('teacher', '2F', 'all-L', 'all-W')}
    probe, step1, step2 = (schedule(CONFIGS[k]) for k in ('probe', 'step1', 'step2'))
    vals = probe['iters'] // probe['val_interval'] if probe['val_interval'] else 0
    supernet = (crop['all-L'] + crop['all-W']) / 2  # a Step-1 path: L and W layers, uniformly sampled
    return [
        StageCost('1. teacher probe', CONFIGS['probe'], probe['iters'], probe['batch'], frozen_ms=crop['teacher'],
              eval_images=vals * VAL_IMAGES, eval_gpus=GPUS, eval_ms=full['teacher'], note=f'{vals} validations'),
        StageCost('2. Step-1 distillation', CONFIGS['step1'], step1['iters'], step1['batch'], frozen_ms=crop['teacher'],
              trained_ms=supernet, note='student: mean of all-L and all-W'),
        StageCost('3. Step-1 search', 'tools/search.py --stage 1', eval_images=SEARCH_ARCHS * VAL_IMAGES, eval_gpus=1,
              eval_ms=(full['all-L'] + full['all-W']) / 2, note=f'{SEARCH_ARCHS} archs assumed, one GPU'),
        StageCost('4. Step-2 distillation', CONFIGS['step2'], step2['iters'], step2['batch'], frozen_ms=crop['teacher'],
              trained_ms=crop['2F'], note='student: the 2F hybrid'),
        StageCost('5. Step-2 search', 'tools/search.py --stage 2', eval_images=SEARCH_ARCHS * VAL_IMAGES, eval_gpus=1,
              eval_ms=full['2F'], note=f'{SEARCH_ARCHS} archs assumed, one GPU'),
        StageCost('6. fine-tune', 'finetune_<ARCH>.py', step1['iters'], step1['batch'], frozen_ms=crop['teacher'],
              trained_ms=crop['2F'], note="the distillation config's schedule, 2F student"),
        StageCost('7. hybrid probe + test', CONFIGS['probe'], probe['iters'], probe['batch'], frozen_ms=crop['2F'],
              eval_images=(vals + 1) * VAL_IMAGES, eval_gpus=GPUS, eval_ms=full['2F']),
    ]


def report() -> Dict[str, object]:
    """Inputs, assumptions, per-stage hours and the markdown table."""
    plan = stages()
    return dict(gpus=GPUS, measured=MEASURED, provenance=PROVENANCE, val_images=VAL_IMAGES, search_archs=SEARCH_ARCHS,
                backward_forwards=BACKWARD_FORWARDS, stages=[dict(vars(s), **stage_hours(s)) for s in plan],
                markdown=format_table(plan))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--json', type=Path, help='write the inputs and estimates here')
    args = parser.parse_args()
    result = report()
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + '\n')
    print('\n'.join(result['markdown']))


if __name__ == '__main__':
    main()
