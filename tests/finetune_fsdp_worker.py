"""Run under torchrun by tests/test_export_finetune.py: build an exported fine-tuning config's model at tiny size (the
teacher shrunk to the exported student's shape), wrap it with the config's own ``model_wrapper_cfg`` and take one
step; rank 0 writes what it built to ``OUT/result.json``."""
import json
import sys

import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import MODEL_WRAPPERS, DefaultScope
from mmengine.utils import import_modules_from_strings
from mmseg.structures import SegDataSample


def main(config: str, out: str, tiny: str) -> None:
    dist.init_process_group('gloo')
    cfg = Config.fromfile(config)
    import_modules_from_strings(**cfg.custom_imports)
    cfg.model.teacher.update(json.loads(tiny))
    with DefaultScope.overwrite_default_scope('mmseg'):
        from mmseg.registry import MODELS
        model = MODELS.build(cfg.model)
    wrapped = MODEL_WRAPPERS.build(dict(cfg.model_wrapper_cfg, module=model))
    optim = build_optim_wrapper(wrapped, dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.1)))
    g = torch.Generator().manual_seed(dist.get_rank())
    images = [torch.randint(0, 256, (3, 64, 96), generator=g, dtype=torch.uint8) for _ in range(2)]
    samples = [SegDataSample(metainfo=dict(img_shape=(64, 96), ori_shape=(64, 96))) for _ in images]
    log_vars = wrapped.train_step(dict(inputs=images, data_samples=samples), optim)  # a batch as the loader gives
    if dist.get_rank() == 0:
        result = dict(wrapper=type(wrapped).__name__, units=getattr(wrapped, 'num_units', None),
                      checkpointing=model.student.grad_checkpointing, arch=model.student.arch,
                      loss=float(log_vars['loss']), world=dist.get_world_size())
        with open(f'{out}/result.json', 'w') as f:
            json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == '__main__':
    main(*sys.argv[1:4])
