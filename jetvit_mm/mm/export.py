"""Export a searched arch: a standalone JetViT checkpoint, a downstream checkpoint and a fine-tuning config."""
from pathlib import Path
from typing import Dict, Optional

import torch

from jetvit_mm.models.supernet import JetViTSupernet

from .checkpoint import load_local_checkpoint


def export_hybrid(supernet: JetViTSupernet, arch: str, out_dir: Path, head_checkpoint: Optional[str] = None,
                  distill_config: Optional[str] = None) -> Dict[str, Path]:
    """Write the ``arch`` subnet of ``supernet`` to ``out_dir``; returns the written paths.

    - ``hybrid_<arch>.pth``: JetViT weights (``{'state_dict', 'meta'}``), loaded strictly by
      ``JetViT(arch=<arch>, checkpoint=...)`` with the supernet's other arguments.
    - ``hybrid_<arch>_with_head.pth`` (with ``head_checkpoint``): the downstream model of the head checkpoint with
      its backbone replaced: ``tools/test.py CONFIG this.pth --cfg-options model.backbone.arch=<arch>``.
    - ``finetune_<arch>.py`` (with ``distill_config``): distillation of the fixed hybrid from the teacher.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = supernet.subnet_state_dict(arch)
    meta = dict(jetvit_arch=arch, build_args={k: v for k, v in supernet.build_args.items() if v is not None})
    paths = {'backbone': out_dir / f'hybrid_{arch}.pth'}
    torch.save(dict(state_dict=state, meta=meta), paths['backbone'])
    if head_checkpoint is not None:
        full = load_local_checkpoint(head_checkpoint, map_location='cpu')
        full = full.get('state_dict', full)
        merged = {k: v for k, v in full.items() if not k.startswith('backbone.')}
        merged.update({f'backbone.{k}': v for k, v in state.items()})
        paths['with_head'] = out_dir / f'hybrid_{arch}_with_head.pth'
        torch.save(dict(state_dict=merged, meta=meta), paths['with_head'])
    if distill_config is not None:
        paths['finetune_config'] = out_dir / f'finetune_{arch}.py'
        paths['finetune_config'].write_text(finetune_config(arch, Path(distill_config).resolve(), paths['backbone']))
    return paths


def finetune_config(arch: str, distill_config: Path, checkpoint: Path) -> str:
    return f'''# Fine-tune the searched hybrid {arch} by distillation from the teacher, arch fixed (written by export).
#   tools/train.py THIS_FILE --cfg-options model.teacher.checkpoint=...
_base_ = ['{distill_config}']

model = dict(student=dict(_delete_=True, type='JetViT', arch='{arch}', checkpoint='{checkpoint.resolve()}',
                          **_base_.backbone))
custom_hooks = []  # one fixed arch: no path sampling
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=False)
'''
