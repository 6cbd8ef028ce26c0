"""Export a searched arch: a standalone JetViT checkpoint, a downstream checkpoint and a fine-tuning config."""
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple, Union

from mmengine.config import Config, ConfigDict

from jetvit_mm.jsonio import atomic_write
from jetvit_mm.models.checkpoint import Checkpoint, read, save
from jetvit_mm.models.supernet import JetViTSupernet

from ..checkpoint import export_config_text
from ..engine.launch import read_config
from ..search.scoring import build_downstream_model, load_downstream_heads, load_supernet

# the student's training switches that a fine-tuning keeps from the distillation config
TRAINING_SWITCHES = ('grad_checkpointing', )


def export_hybrid(supernet: JetViTSupernet, arch: str, out_dir: Path,
                  head_checkpoint: Optional[Union[str, Checkpoint]] = None, distill_config: Optional[str] = None,
                  downstream_cfg: Optional[Config] = None) -> Dict[str, Path]:
    """Write the ``arch`` subnet of ``supernet`` to ``out_dir``; returns the written paths.

    - ``hybrid_<arch>.pth``: JetViT weights (``{'state_dict', 'meta'}``), loaded strictly by
      ``JetViT(arch=<arch>, checkpoint=...)`` with the supernet's other arguments.
    - ``hybrid_<arch>_with_head.pth`` (with ``head_checkpoint``, a path or read already): the downstream model of the
      head checkpoint with its backbone replaced: ``tools/test.py CONFIG this.pth --cfg-options
      model.backbone.arch=<arch>``. With
      ``downstream_cfg`` (the config of that model) its meta holds that config, backbone set to the hybrid,
      literal-only (``meta['cfg']``), so ``tools/infer.py this.pth IMAGES`` needs no config.
    - ``finetune_<arch>.py`` (with ``distill_config``): distillation of the fixed hybrid from the teacher.
    """
    build_args = {k: _as_builtins(v) for k, v in supernet.build_args.items() if v is not None}
    if distill_config is not None:
        check_distill_teacher(Path(distill_config), build_args['model_name'])
    state = supernet.subnet_state_dict(arch)  # checks the arch; holds the subnet's spec
    full, head_meta, cfg_text = None, {}, None
    if head_checkpoint is not None:  # read every input before anything is written
        head = read(head_checkpoint)
        full, head_meta = head.state, head.meta
        if downstream_cfg is not None:
            cfg_text = export_config_text(downstream_cfg, arch, build_args)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {'backbone': out_dir / f'hybrid_{arch}.pth'}
    save(dict(state_dict=state, meta={'build_args': build_args}),
                    paths['backbone'])
    if full is not None:
        merged = {k: v for k, v in full.items() if not k.startswith('backbone.')}
        merged.update({f'backbone.{k}': v for k, v in state.items()})
        paths['with_head'] = out_dir / f'hybrid_{arch}_with_head.pth'
        meta = {'build_args': build_args}
        if cfg_text is not None:
            meta['cfg'] = cfg_text
        if head_meta.get('dataset_meta'):  # the classes and palette the head was trained with
            meta['dataset_meta'] = head_meta['dataset_meta']
        save(dict(state_dict=merged, meta=meta), paths['with_head'])
    if distill_config is not None:
        paths['finetune_config'] = out_dir / f'finetune_{arch}.py'
        text = finetune_config(arch, Path(distill_config).resolve(), paths['backbone'], build_args)
        atomic_write(paths['finetune_config'], lambda f: f.write(text.encode()))
    return paths


def _as_builtins(value):
    """``value`` as plain Python data (a config's ``ConfigDict`` of ``mixers`` as a dict), for weights-only loads."""
    if isinstance(value, Mapping):
        return {k: _as_builtins(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_as_builtins(v) for v in value]
        return type(value)(items) if type(value) in (list, tuple) else items
    return value


def export_from_checkpoint(cfg: Config, checkpoint: str, arch: str, out_dir: Path,
                           head_checkpoint: Optional[str] = None, distill_config: Optional[str] = None
                           ) -> Dict[str, Path]:
    """:func:`export_hybrid` of the supernet in a distillation ``checkpoint``, built with ``cfg``'s backbone (a
    downstream config, as the search uses); ``head_checkpoint`` must fit ``cfg``'s model, as the search requires."""
    supernet, _ = load_supernet(checkpoint, cfg)
    head = None if head_checkpoint is None else read(head_checkpoint)  # read once: checked here, exported there
    if head is not None:
        load_downstream_heads(build_downstream_model(cfg), head, Path(cfg.filename).name)
    return export_hybrid(supernet, arch, out_dir, head, distill_config, downstream_cfg=cfg)


def check_distill_teacher(distill_config: Path, model_name: str) -> None:
    """The fine-tuning config distils from ``distill_config``'s teacher: it must be the searched model's teacher."""
    teacher = read_config(distill_config).get('model', {}).get('teacher') or {}
    if teacher.get('model_name', model_name) != model_name:
        raise ValueError(f'--distill-config {distill_config} distils from a {teacher["model_name"]} teacher, but the '
                         f'searched supernet is a {model_name}: pass the distillation config of {model_name}')


def _distill_settings(distill_config: Path) -> Tuple[list, Optional[dict], Dict[str, object]]:
    """What the fine-tuning keeps of ``distill_config``: its custom hooks except :class:`SupernetSamplerHook` (one
    fixed arch samples no path), its FSDP2 wrapper if it has one (None: DDP), and the student's training switches
    (``grad_checkpointing``)."""
    cfg = read_config(distill_config)
    hooks = [h.to_dict() if isinstance(h, ConfigDict) else dict(h) for h in cfg.get('custom_hooks') or []
             if str(h.get('type')).split('.')[-1] != 'SupernetSamplerHook']
    wrapper = cfg.get('model_wrapper_cfg')
    fsdp2 = (_as_builtins(dict(wrapper)) if wrapper and str(wrapper.get('type')).split('.')[-1] == 'FSDP2Wrapper'
             else None)
    student = cfg.get('model', {}).get('student') or {}
    switches = {k: student[k] for k in TRAINING_SWITCHES if k in student}
    return hooks, fsdp2, switches


def finetune_config(arch: str, distill_config: Path, checkpoint: Path, build_args: Dict[str, object]) -> str:
    """The fine-tuning config: ``distill_config`` with its student replaced by the fixed hybrid, built with the
    searched supernet's arguments (``build_args``: model size, window, L options), not the distillation config's
    top-level variables, which a derived config (e.g. ViT-L) may not have overridden. The distillation config's
    custom hooks are kept (an EMA, say), except the path sampler, and so are its FSDP2 wrapper (the 7B and Giant
    configs: a fixed arch shards as the supernet did) and the student's ``grad_checkpointing``; other runs fine-tune
    under DDP."""
    hooks, fsdp2, switches = _distill_settings(distill_config)
    args = ''.join(f', {k}={v!r}' for k, v in {**build_args, **switches}.items() if k != 'out_indices')
    if fsdp2:  # replaces the base's wrapper whole, as the distillation config did
        wrapper = 'dict(' + ', '.join(f'{k}={v!r}' for k, v in {'_delete_': True, **fsdp2}.items()) + ')'
    else:
        wrapper = "dict(type='MMDistributedDataParallel', find_unused_parameters=False)"
    return f'''# Fine-tune the searched hybrid {arch} by distillation from the teacher, arch fixed (written by export).
#   tools/train.py THIS_FILE --cfg-options model.teacher.checkpoint=...
_base_ = ['{distill_config}']

model = dict(student=dict(_delete_=True, type='JetViT', arch='{arch}', checkpoint='{checkpoint.resolve()}'{args}))
custom_hooks = {hooks!r}  # the distillation's, less the path sampler
model_wrapper_cfg = {wrapper}
'''
