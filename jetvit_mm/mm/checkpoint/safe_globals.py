"""The data types an mmengine runner checkpoint holds beyond torch's weights-only defaults, allowed for the process by
``import jetvit_mm.mm``: mmengine 0.10.7 writes a ``message_hub`` of :class:`~mmengine.logging.HistoryBuffer` objects
(numpy arrays inside, bound statistics methods pickled as ``getattr(HistoryBuffer, 'mean')``), so that the core's
:func:`~jetvit_mm.models.checkpoint.read` and the frameworks' clients (mmseg's ``init_model``, the inferencers,
through mmengine's unchanged loader) load them, still weights-only."""
import pickle
from typing import Any, Callable, List, Tuple, Union

import numpy as np
import torch
from mmengine.logging import HistoryBuffer

_BUILTIN_STATISTICS = frozenset({'min', 'max', 'current', 'mean'})


def _history_buffer_getattr(obj: Any, name: str) -> Any:
    """``getattr`` restricted to what ``HistoryBuffer.__getstate__`` pickles."""
    allowed = _BUILTIN_STATISTICS | set(HistoryBuffer._statistics_methods)
    if obj is not HistoryBuffer or name not in allowed:
        raise pickle.UnpicklingError(f'refused getattr({obj!r}, {name!r}) while loading a checkpoint: only '
                                     f'HistoryBuffer statistics methods {sorted(allowed)} are allowed')
    return getattr(obj, name)


def runner_safe_globals() -> List[Union[Callable, Tuple[Callable, str]]]:
    """The globals an mmengine runner checkpoint needs beyond torch's weights-only defaults: mmengine's
    ``HistoryBuffer``, numpy's arrays, scalars and dtypes (their reconstructors build data only), and under the name
    ``builtins.getattr`` not ``getattr`` but :func:`_history_buffer_getattr`, which resolves nothing but
    ``HistoryBuffer``'s statistics methods (``HistoryBuffer.__getstate__`` pickles them so) and refuses any other
    name."""
    multiarray = np._core.multiarray if hasattr(np, '_core') else np.core.multiarray
    numpy_globals = [multiarray.scalar, multiarray._reconstruct, np.ndarray, np.dtype]
    # numpy >= 1.25 pickles dtypes through their concrete classes (numpy.dtypes.Float64DType, ...)
    numpy_globals += [type(np.dtype(code)) for code in '?bBhHiIlLqQefdgFDGSUV']
    return [HistoryBuffer, *numpy_globals, (_history_buffer_getattr, 'builtins.getattr')]


def allow_runner_checkpoint_types() -> None:
    """Add :func:`runner_safe_globals` to torch's weights-only allow-list, for the process: what ``import
    jetvit_mm.mm`` (a config's ``custom_imports``) does, so that a checkpoint of mmengine's own runner (a config of
    mmseg's or mmdet's bases, no ``runner_type``) loads in mmseg's ``init_model``, ``MMSegInferencer``, mmdet's
    ``init_detector`` and ``DetInferencer`` through mmengine's unchanged loader, still weights-only. Nothing that
    runs code is allowed: a pickle naming any other global stays refused by torch. Calling it again adds what is
    missing (torch's ``safe_globals`` block takes its globals out again when it ends)."""
    present = torch.serialization.get_safe_globals()
    missing = [entry for entry in runner_safe_globals() if entry not in present]
    if missing:
        torch.serialization.add_safe_globals(missing)
