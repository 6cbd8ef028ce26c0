"""The memory planner on a distillation config (``tools/benchmark.py plan``): the config's distiller is built on the
meta device (nothing allocated), its parameters counted, and one forward at the requested batch and input size
measured for saved activations (:mod:`jetvit_mm.benchmark.planner`; every assumption is stated there)."""
from typing import Dict, Sequence, Tuple

import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

from jetvit_mm.benchmark.planner import GIB, Activations, count_params, measure_activations, plan_memory
from jetvit_mm.distill.fsdp2 import shard_units
from jetvit_mm.dtypes import to_dtype

from ..registry import MODELS


def config_settings(cfg: Config) -> Dict[str, object]:
    """What the planner takes from a config: per-GPU batch, crop size, FSDP2 (and its param dtype), the patch."""
    model = cfg.get('model') or {}
    if str(model.get('type', '')).split('.')[-1] != 'FeatureDistiller':
        raise ValueError(f'plan: the config\'s model is a {model.get("type")!r}, not a FeatureDistiller (the planner '
                         'plans distillation steps)')
    wrapper = cfg.get('model_wrapper_cfg') or {}
    fsdp = wrapper.get('type') == 'FSDP2Wrapper'
    size = cfg.get('crop_size') or (model.get('data_preprocessor') or {}).get('size')
    batch = (cfg.get('train_dataloader') or {}).get('batch_size')
    return {'fsdp': fsdp, 'param_dtype': (wrapper.get('param_dtype') or 'float32') if fsdp else 'float32',
            'size': tuple(size) if size else None, 'batch': batch}


def build_meta_distiller(cfg: Config) -> torch.nn.Module:
    with DefaultScope.overwrite_default_scope('mmseg'), torch.device('meta'):
        return MODELS.build(cfg.model)


def plan_config(cfg: Config, world_size: int, batch: int, size: Tuple[int, int], gpu_bytes: int = 80 * GIB,
                reserve_bytes: int = 0) -> Dict[str, object]:
    """The per-GPU plan of ``cfg``'s distillation step on the student's most memory-hungry path (each layer's most
    expensive candidate, :func:`worst_path`); each measured path's activation peaks are under ``by_arch``."""
    settings = config_settings(cfg)
    model = build_meta_distiller(cfg)
    student = model.student
    patch = student.patch_size
    if size[0] % patch or size[1] % patch:
        raise ValueError(f'--size {size[0]} {size[1]}: not a multiple of the patch size {patch}')
    units = shard_units(model)
    params = count_params(model, units, list(student.blocks))
    dtype = to_dtype(settings['param_dtype'], 'param_dtype')
    for param in model.parameters():  # what FSDP2's MixedPrecisionPolicy computes with (buffers keep theirs)
        param.data = param.data.to(dtype)
    model.train()
    student.set_grad_checkpointing(False)  # the checkpointed figure is derived (planner docstring)
    space = list(getattr(student, 'search_space', None) or [student.arch])
    candidates = sorted({c for layer in space for c in layer})
    x = torch.empty(batch, 3, *size, device='meta', dtype=dtype)
    runs = {}
    for letter in candidates:  # the letter where a layer has it, else the layer's first candidate
        student.set_arch(''.join(letter if letter in layer else layer[0] for layer in space))
        runs[student.arch] = measure_activations(model, list(student.blocks), lambda: model.loss(x)['loss_distill'])
    acts = worst_path(list(runs.values()))
    plan = plan_memory(params, acts, world_size, settings['fsdp'], settings['param_dtype'], gpu_bytes, reserve_bytes)
    by_arch = {arch: {'no_checkpointing': a.peak(False), 'checkpointing': a.peak(True)} for arch, a in runs.items()}
    return {**plan, 'batch': batch, 'size': list(size), 'by_arch': by_arch}


def worst_path(runs: Sequence[Activations]) -> Activations:
    """Each layer's most expensive candidate (and the most the rest and the block inputs took): the path that needs
    the most activation memory, from runs that between them ran every candidate of every layer."""
    return Activations(outside=max(a.outside for a in runs), block_inputs=max(a.block_inputs for a in runs),
                       per_block=[max(column) for column in zip(*(a.per_block for a in runs))],
                       largest_saved=max(a.largest_saved for a in runs),
                       largest_input=max(a.largest_input for a in runs))
