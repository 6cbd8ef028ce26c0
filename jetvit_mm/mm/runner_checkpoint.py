"""An mmengine runner checkpoint's own state: the model config its text names (read literal-only), and the runner
state kept as plain data. (Where its JetViT sits: :func:`jetvit_mm.models.checkpoints.jetvit_part`.)

It keeps the runner's own state in a checkpoint plain data (:func:`plain_message_hub`), so that any
``torch.load(..., weights_only=True)`` reads the file without an allow-list: mmseg's ``init_model``, the inferencers.
"""
import warnings
from typing import Any, Dict, Optional

import numpy as np
import torch
from mmengine.logging import HistoryBuffer

from .config_text import literal_assignments

__all__ = ['plain_message_hub', 'restore_message_hub', 'saved_model_config']

StateDict = Dict[str, torch.Tensor]


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


PLAIN_BUFFER = 'history_buffer'  # the key marking a HistoryBuffer written as plain data


def _without_numpy(value: Any) -> Any:
    """``value`` with numpy scalars and arrays (in dicts, lists, tuples) as Python numbers and lists."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return type(value)((k, _without_numpy(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_without_numpy(v) for v in value)
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
            (key, {PLAIN_BUFFER: True, 'log_history': _without_numpy(buf._log_history),
                   'count_history': _without_numpy(buf._count_history), 'max_length': int(buf.max_length)})
            if isinstance(buf, HistoryBuffer) else (key, buf) for key, buf in scalars.items())
    if isinstance(hub.get('runtime_info'), dict):
        hub['runtime_info'] = _without_numpy(hub['runtime_info'])


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
