"""A runner checkpoint's message hub as plain data: checkpoints this project's runner writes hold no
:class:`~mmengine.logging.HistoryBuffer` (any weights-only load reads them), and a resumed run gets its buffers back."""
from typing import Any, Dict

import numpy as np
from mmengine.logging import HistoryBuffer

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
