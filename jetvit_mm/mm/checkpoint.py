"""Loading the runner's own checkpoints on torch >= 2.6 without turning off safe loading.

torch >= 2.6 unpickles ``torch.load`` files with the weights-only unpickler by default. mmengine
0.10.7 writes checkpoints whose ``message_hub`` holds :class:`~mmengine.logging.HistoryBuffer`
objects (numpy arrays inside, and bound statistics methods pickled as ``getattr(HistoryBuffer,
'mean')``), so ``--resume``, ``load_from`` and ``tools/test.py CONFIG CKPT`` fail with
"Weights only load failed".

This module is the project's one mechanism for that. :func:`load_local_checkpoint` still uses
``weights_only=True`` for *every* file, external weights included, and only widens the allow-list by the data
types a runner checkpoint contains: ``HistoryBuffer``, numpy arrays/scalars/dtypes, and a ``getattr`` that resolves
nothing but ``HistoryBuffer``'s registered statistics methods. Nothing else becomes loadable: a pickle that names
any other global is still refused by torch. (Checkpoints this project's runner writes now hold none of these:
:class:`~jetvit_mm.mm.hooks.PlainCheckpointHook`; older ones do.)

The config text a runner checkpoint carries is never executed: mmengine's ``Runner.resume`` runs it through
``Config.fromstring``, so every checkpoint loaded here has it replaced by its literal assignments only
(:mod:`jetvit_mm.mm.config_text`).

It applies only where this project asks for it. Importing :mod:`jetvit_mm.mm` changes no loader of mmengine: it
teaches this project's own readers (``JetViT(checkpoint=...)``) runner checkpoints (:func:`register_runner_readers`).
The runner the configs name (:class:`~jetvit_mm.mm.runner.JetViTRunner`) loads ``load_from`` and resumed checkpoints
inside :func:`runner_checkpoint_loading`, which puts mmengine's loaders back when the load ends; this project's
command-line tools that load through mmengine outside a runner call :func:`enable_runner_checkpoint_loading`.
"""
import collections
import contextlib
import functools
import os.path as osp
import pickle
import re
from typing import Any, Callable, Iterator, List, Tuple, Union

import numpy as np
import torch
from mmengine.logging import HistoryBuffer
from mmengine.runner.checkpoint import CheckpointLoader
from torch import nn

from jetvit_mm.models.arch import SPEC_KEY, check_spec, spec_from_state
from jetvit_mm.models.checkpoints import (
    register_fallback_loader,
    strip_wrapper_prefix,
)
from jetvit_mm.models.checkpoints.io import UnsafeCheckpointError, torch_load

from .config_text import neutralise_config_text

__all__ = ['allow_runner_checkpoint_types', 'check_checkpoint_fits', 'check_fits', 'enable_runner_checkpoint_loading',
           'load_local_checkpoint', 'load_weights', 'refusal_message', 'register_runner_readers',
           'runner_checkpoint_loading', 'runner_safe_globals']

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


def load_local_checkpoint(filename: str, map_location: Any = None, mmap: bool = False) -> Any:
    """Load a local checkpoint with ``weights_only=True`` and the runner's data types allowed; the config text it
    carries is made literal-only (:func:`~jetvit_mm.mm.config_text.neutralise_config_text`), so nothing downstream
    can execute it.

    ``mmap=True`` maps the tensors instead of reading them (cheap when only ``meta`` is wanted).
    """
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'{filename} can not be found.')
    allow_runner_checkpoint_types()
    try:
        checkpoint = torch_load(filename, map_location=map_location, weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as refused:
        raise UnsafeCheckpointError(refusal_message(filename, refused)) from None
    from .fsdp_checkpoint import fill_sharded_state  # FSDP2 'sharded' mode: the weights sit in a DCP directory
    return fill_sharded_state(neutralise_config_text(checkpoint), filename)


def refusal_message(filename: str, refused: Exception) -> str:
    """What a user reads when this project's loader (its runner and tools, also under mmseg's and mmdet's own
    ``tools/train.py`` / ``tools/test.py`` on its configs) refuses a file: which object was refused, that this stays
    so, and what to do instead."""
    found = re.search(r'GLOBAL ([\w.]+)', str(refused))
    reason = f'it names the Python global {found.group(1)}' if found else f'{type(refused).__name__}: {refused}'
    return (f'{filename} was refused by jetvit_mm\'s checkpoint loader (the runner and tools of jetvit_mm\'s '
            f'configs; torch.load with weights_only=True, allowing only the data types of mmengine runner '
            f'checkpoints): {reason}. The file holds a Python object that is not checkpoint data, '
            f'and it stays refused: there is no setting that turns safe loading off. Checkpoints written by jetvit_mm '
            f'(tools/train.py, tools/export_hybrid.py) and published weights (.pth state dicts, .safetensors) load '
            f'as they are; a file from another tool that you trust can be re-saved as a plain state dict '
            f'(torch.save(model.state_dict(), ...)) or as .safetensors, and loaded from there')


def _without_config_code(loader: Callable) -> Callable:
    """``loader`` (one of mmengine's checkpoint schemes: http, ceph, ...) with the config text of what it loads made
    literal-only, as :func:`load_local_checkpoint` does for local files."""
    if getattr(loader, 'jetvit_neutralised', False):
        return loader

    @functools.wraps(loader)
    def load(*args: Any, **kwargs: Any) -> Any:
        return neutralise_config_text(loader(*args, **kwargs))

    load.jetvit_neutralised = True
    return load


def _load_runner_checkpoint(path: str) -> Any:
    return load_local_checkpoint(path, map_location='cpu')


def register_runner_readers() -> None:
    """Teach this project's pure readers (``JetViT(checkpoint=...)``) runner checkpoints: the loader of what torch's
    default allow-list refuses (a sharded FSDP2 checkpoint's directory among them). Done when :mod:`jetvit_mm.mm` is
    imported."""
    register_fallback_loader(_load_runner_checkpoint)


def enable_runner_checkpoint_loading() -> None:
    """Make mmengine load local checkpoints through :func:`load_local_checkpoint`, and make every other scheme it
    knows (http, ...) hand back checkpoints whose config text cannot run, for the rest of the process.

    For this project's command-line tools that load through mmengine outside a runner (``tools/search.py``,
    ``tools/export_hybrid.py``); never called at import. Calling it again is harmless. For a block only:
    :func:`runner_checkpoint_loading`.
    """
    for prefix, loader in list(CheckpointLoader._schemes.items()):
        if prefix:
            CheckpointLoader.register_scheme(prefixes=prefix, loader=_without_config_code(loader), force=True)
    CheckpointLoader.register_scheme(prefixes='', loader=load_local_checkpoint, force=True)
    register_runner_readers()


@contextlib.contextmanager
def runner_checkpoint_loading() -> Iterator[None]:
    """mmengine's checkpoint loaders as :func:`enable_runner_checkpoint_loading` sets them, for the block only, put
    back as they were when it ends, on success and on error (what :class:`~jetvit_mm.mm.runner.JetViTRunner` loads
    ``load_from`` and resumed checkpoints in)."""
    saved = collections.OrderedDict(CheckpointLoader._schemes)
    try:
        enable_runner_checkpoint_loading()
        yield
    finally:
        CheckpointLoader._schemes = saved


def check_checkpoint_fits(model: nn.Module, filename: str, config_name: str) -> None:
    """:func:`check_fits` of the checkpoint ``filename``, reading only its pickle (mapped): for a load that follows
    elsewhere (the runner's ``load_from``), which checks the rest."""
    check_fits(model, load_local_checkpoint(filename, map_location='cpu', mmap=True), filename, config_name)


def load_weights(model: nn.Module, checkpoint: Any, filename: str, config_name: str) -> None:
    """Load ``checkpoint`` (``filename`` read whole by :func:`load_local_checkpoint`: weights only, its CRCs and
    tensor digest checked) into ``model``, after :func:`check_fits`; keys beyond the model (a distiller's
    ``teacher.*``) are left out, as mmengine's non-strict load leaves them."""
    from mmengine.model import is_model_wrapper

    check_fits(model, checkpoint, filename, config_name)
    model = model.module if is_model_wrapper(model) else model
    state = strip_wrapper_prefix(checkpoint.get('state_dict', checkpoint))
    own = model.state_dict().keys()
    model.load_state_dict({k: v for k, v in state.items() if k in own}, strict=False)


def check_fits(model: nn.Module, raw: Any, filename: str, config_name: str) -> None:
    """Refuse to evaluate ``model`` with a checkpoint (``raw``, loaded from ``filename``) that leaves part of it as
    initialised or holds another arch.

    mmengine's ``load_from`` loads non-strictly and only warns, so a missing head, a backbone of another patch size,
    a hybrid of another arch (W and F layers have the same parameters) or one trained with another W window or L
    option (no parameters at all) would be scored silently. Keys the checkpoint has beyond the model (a distiller's
    ``teacher.*``) are allowed; so are the L mixers' conv parameters when the checkpoint is a teacher's (they stay
    as initialised, as when ``JetViT`` loads a teacher), and the arch spec of a checkpoint written before specs.
    """
    from mmengine.model import is_model_wrapper

    from jetvit_mm.models.jetvit import JetViT

    model = model.module if is_model_wrapper(model) else model
    state = raw.get('state_dict', raw) if isinstance(raw, dict) else None
    if not isinstance(state, dict):
        raise ValueError(f'{filename} does not hold a state dict')
    state = strip_wrapper_prefix(state)
    backbone = getattr(model, 'backbone', None)
    optional = {k for k in model.state_dict() if k.endswith(SPEC_KEY)}
    if isinstance(backbone, JetViT):
        saved = spec_from_state(state, 'backbone.', filename)
        check_spec(saved, backbone.spec, filename, what='model')
        new = {f'backbone.{name}' for name in backbone.new_parameter_names()}
        if (saved is None or saved.is_teacher) and not new & state.keys():  # a teacher's: none of them, not some
            optional |= new
    own = {k: v for k, v in model.state_dict().items() if not k.startswith('data_preprocessor.')}
    missing = sorted(k for k in own if k not in state and k not in optional)
    shapes = sorted(f'{k}: {tuple(state[k].shape)} vs {tuple(v.shape)}' for k, v in own.items()
                    if k in state and not k.endswith(SPEC_KEY) and tuple(state[k].shape) != tuple(v.shape))
    if missing or shapes:
        raise ValueError(f'{filename} does not fit the model of {config_name}: '
                         + (f'{len(missing)} missing key(s) {missing[:8]}' if missing else '')
                         + ('; ' if missing and shapes else '')
                         + (f'{len(shapes)} mis-shaped (checkpoint vs model) {shapes[:8]}' if shapes else ''))
