"""The config a checkpoint carries (mmengine's ``meta['cfg']``), read literal-only and never run
(:mod:`jetvit_mm.models.checkpoint.config_text`), and the config text an export writes into its checkpoint."""
import copy
import warnings
from typing import Any, Dict, Optional, Union

from mmengine.config import Config

from jetvit_mm.models.checkpoint import Checkpoint, read
from jetvit_mm.models.checkpoint.config_text import literal_assignments, literal_text


def saved_model_config(meta: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """``model`` of the config text mmengine's runner saves in a checkpoint's meta (literal-only), or None."""
    text = meta.get('cfg')
    if not isinstance(text, str):
        return None
    model = literal_assignments(text).get('model')
    if not isinstance(model, dict):
        warnings.warn('the checkpoint\'s saved config names no literal model: its arch is not checked', stacklevel=3)
        return None
    return model


def config_of_checkpoint(checkpoint: Union[str, Checkpoint]) -> Config:
    """The config saved in ``checkpoint``'s ``meta['cfg']`` (a path, or read already), read without running it;
    ValueError naming the ``CONFIG CHECKPOINT`` form when the checkpoint holds none (or none with a literal
    ``model``)."""
    checkpoint = read(checkpoint, mmap=True)
    text = checkpoint.meta.get('cfg')
    values = literal_assignments(text) if isinstance(text, str) else {}
    if not isinstance(values.get('model'), dict):
        found = 'no config text (meta["cfg"])' if not isinstance(text, str) else \
            'config text (meta["cfg"]) without a literal `model = dict(...)`'
        raise ValueError(f'{checkpoint.path} holds {found}, so it cannot be run on its own: give its config too, '
                         f'tools/infer.py CONFIG CHECKPOINT IMAGES... (checkpoints of tools/train.py and the '
                         f'_with_head.pth of tools/export_hybrid.py carry their config)')
    values.pop('_base_', None)
    return without_backbone_checkpoint(Config(values, cfg_text=literal_text(values), filename=str(checkpoint.path)))


def without_backbone_checkpoint(cfg: Config) -> Config:
    """A copy of ``cfg`` whose backbone loads no weights file of its own (``model.backbone.checkpoint=None``):
    the model's weights come from the checkpoint it is run with, and the saved path may not exist here."""
    cfg = copy.deepcopy(cfg)
    backbone = cfg.model.get('backbone')
    if isinstance(backbone, dict) and backbone.get('checkpoint') is not None:
        backbone['checkpoint'] = None
    return cfg


def export_config_text(cfg: Config, arch: str, build_args: Dict[str, Any]) -> Optional[str]:
    """The literal text of downstream config ``cfg`` with its backbone the exported JetViT (``arch``, built with
    the supernet's ``build_args``, no weights file of its own), for ``meta['cfg']`` of an exported checkpoint; None
    (with a warning) when ``cfg`` holds values that are not literals, or no ``model.backbone``."""
    values = cfg.to_dict()
    backbone = (values.get('model') or {}).get('backbone')
    if not isinstance(backbone, dict):
        warnings.warn(f'{cfg.filename} has no model.backbone: the exported checkpoint holds no config', stacklevel=2)
        return None
    for key in ('search_space', 'step1_arch'):  # a supernet backbone's: the export is one arch
        backbone.pop(key, None)
    backbone.update(build_args, type='JetViT', arch=arch, checkpoint=None)
    values.pop('_base_', None)
    try:
        return literal_text(values)
    except TypeError as error:
        warnings.warn(f'{cfg.filename} holds a value that is not a config literal ({error}): the exported checkpoint '
                      f'holds no config; run it with its config (tools/infer.py CONFIG CHECKPOINT ...)', stacklevel=2)
        return None
