"""Where a JetViT sits inside an mmengine runner checkpoint, and which spec it was saved with.

A distiller holds its JetViT under ``student.`` (next to ``teacher.``), a segmentor, depth estimator or detector
under ``backbone.``. Its spec is read from the state dict (``<prefix>_extra_state``) alone. A checkpoint written
before specs existed, whose saved config text (read literal-only, :mod:`jetvit_mm.mm.config_text`, never run) names a
hybrid arch, is refused naming the one-time converter (``tools/upgrade_checkpoint.py``, which writes that spec into
its state dict).

It also keeps the runner's own state in a checkpoint plain data (:func:`plain_message_hub`), so that any
``torch.load(..., weights_only=True)`` reads the file without an allow-list: mmseg's ``init_model``, the inferencers.
"""
import warnings
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
from mmengine.logging import HistoryBuffer

from jetvit_mm.models.arch import UPGRADE_HINT, ArchSpec, mixer_table_of, spec_from_state
from jetvit_mm.models.checkpoints import strip_prefix
from jetvit_mm.models.checkpoints.legacy import legacy_build_args
from jetvit_mm.models.supernet import parse_search_space, step2_search_space
from jetvit_mm.models.teachers import teacher_depth

from .config_text import literal_assignments

__all__ = ['RUNNER_PREFIXES', 'legacy_spec', 'plain_message_hub', 'restore_message_hub', 'runner_jetvit_part',
           'saved_model_config', 'saved_spec']

StateDict = Dict[str, torch.Tensor]
RUNNER_PREFIXES = ('student.', 'backbone.')  # the model config key of each is the prefix without its dot


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


def legacy_spec(meta: Dict[str, Any], name: str) -> Optional[ArchSpec]:
    """The spec of the JetViT ``name`` (``'student'``, ``'backbone'``) from a runner checkpoint's saved config, for
    checkpoints written before specs existed (for the converter); None when the config names no arch (a teacher)."""
    model = saved_model_config(meta)
    if model is None:
        return None
    cfg = model.get(name)
    if not isinstance(cfg, dict) and name == 'backbone' and str(model.get('type', '')).endswith('JetViTDepthAnything'):
        cfg = model  # its JetViT arguments sit at the top level
    if not isinstance(cfg, dict):
        return None
    cfg = legacy_build_args(cfg)  # window_size / linear_cfg / window_kernel of old configs as a mixer table
    if str(cfg.get('type', '')).split('.')[-1] == 'JetViTSupernet':
        letters = mixer_table_of(cfg).letters
        space = cfg.get('search_space') or mixer_table_of(cfg).efficient_letters
        if cfg.get('step1_arch'):
            space = step2_search_space(cfg['step1_arch'], letters)
        depth = cfg.get('depth') or teacher_depth(cfg.get('model_name', 'dinov3_vitb16'))
        return ArchSpec.build(cfg.get('model_name'), cfg, search_space=parse_search_space(space, len(space)
                              if not isinstance(space, str) else depth, letters))
    arch = cfg.get('arch')
    return ArchSpec.build(cfg.get('model_name'), cfg, arch=arch) if isinstance(arch, str) else None


def saved_spec(state: StateDict, meta: Dict[str, Any], prefix: str, source: str = 'checkpoint'
               ) -> Optional[ArchSpec]:
    """The spec of the JetViT under ``prefix`` (``'backbone.'``) of a runner checkpoint: its state dict's. None when
    it holds none and its saved config names no hybrid (a teacher); a hybrid without one is refused (the converter
    writes it)."""
    found = spec_from_state(state, prefix, source)
    if found is None:
        legacy = legacy_spec(meta, prefix.rstrip('.'))
        if legacy is not None and not legacy.is_teacher:
            raise ValueError(f'{source}: a checkpoint of the old format, its JetViT under {prefix!r} '
                             f'({legacy.describe()}) without an arch spec in its state dict; {UPGRADE_HINT}')
    return found


def runner_jetvit_part(state: StateDict, meta: Dict[str, Any], path: str
                       ) -> Optional[Tuple[StateDict, Optional[ArchSpec]]]:
    """The JetViT of a runner checkpoint (prefix removed) and its spec; None if ``state`` is not one. Registered
    with the pure checkpoint readers by :func:`~jetvit_mm.mm.checkpoint.enable_runner_checkpoint_loading`."""
    for prefix in RUNNER_PREFIXES:
        if any(k.startswith(prefix) for k in state):
            return strip_prefix(state, prefix), saved_spec(state, meta, prefix, path)
    return None


PLAIN_BUFFER = 'history_buffer'  # the key marking a HistoryBuffer written as plain data


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars and arrays (in dicts, lists, tuples) as Python numbers and lists."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return type(value)((k, _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def plain_message_hub(checkpoint: Dict[str, Any]) -> None:
    """Turn the ``message_hub`` of a checkpoint about to be saved into plain data, in place: each
    :class:`~mmengine.logging.HistoryBuffer` into ``{'history_buffer': True, 'log_history': [...],
    'count_history': [...], 'max_length': n}``, numpy values into Python numbers. torch's weights-only unpickler
    then reads the file as it is; :func:`restore_message_hub` turns it back when a run resumes."""
    hub = checkpoint.get('message_hub')
    if not isinstance(hub, dict):
        return
    scalars = hub.get('log_scalars')
    if isinstance(scalars, dict):
        hub['log_scalars'] = type(scalars)(
            (key, {PLAIN_BUFFER: True, 'log_history': _plain(buf._log_history),
                   'count_history': _plain(buf._count_history), 'max_length': int(buf.max_length)})
            if isinstance(buf, HistoryBuffer) else (key, buf) for key, buf in scalars.items())
    if isinstance(hub.get('runtime_info'), dict):
        hub['runtime_info'] = _plain(hub['runtime_info'])


def restore_message_hub(checkpoint: Dict[str, Any]) -> None:
    """The inverse of :func:`plain_message_hub`, in place, for mmengine's ``MessageHub.load_state_dict`` (a
    checkpoint written with HistoryBuffer objects is left as it is)."""
    hub = checkpoint.get('message_hub') if isinstance(checkpoint, dict) else None
    scalars = hub.get('log_scalars') if isinstance(hub, dict) else None
    if not isinstance(scalars, dict):
        return
    for key, buf in scalars.items():
        if isinstance(buf, dict) and buf.get(PLAIN_BUFFER) is True:
            scalars[key] = HistoryBuffer(buf['log_history'], buf['count_history'], buf['max_length'])
