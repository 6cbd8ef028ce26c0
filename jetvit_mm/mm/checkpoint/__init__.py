"""The adapter's side of checkpoints: what an mmengine runner checkpoint holds beyond weights, read safely.

Reading is the core's (:func:`jetvit_mm.models.checkpoint.read`: weights-only, checked, config text literal-only).
mmengine 0.10.7 writes checkpoints whose ``message_hub`` holds :class:`~mmengine.logging.HistoryBuffer` objects
(numpy arrays inside, and bound statistics methods pickled as ``getattr(HistoryBuffer, 'mean')``); importing
:mod:`jetvit_mm.mm` adds exactly those data types to torch's weights-only allow-list
(:func:`allow_runner_checkpoint_types`), so that the core's read and the frameworks' clients (mmseg's
``init_model``, the inferencers, through mmengine's unchanged loader) load them, still weights-only. Checkpoints this
project's runner writes hold none of them (:func:`plain_message_hub`); older ones do.

Here too: the hook that saves each checkpoint so (:class:`CheckpointDigestHook`), the fit of a checkpoint to a whole
model (:func:`check_fits`), and the config a checkpoint carries (:func:`config_of_checkpoint`, read literal-only,
never run).
"""
import copy
import pickle
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.logging import HistoryBuffer
from torch import nn

from jetvit_mm.models.arch import SPEC_KEY, check_spec, spec_from_state
from jetvit_mm.models.checkpoint import read, strip_wrapper_prefix
from jetvit_mm.models.checkpoint.config_text import literal_assignments, literal_text
from jetvit_mm.models.checkpoint.integrity import with_digest

from ..registry import HOOKS

__all__ = ['ArchSpecHook', 'CheckpointDigestHook', 'allow_runner_checkpoint_types', 'check_checkpoint_fits',
           'check_fits', 'config_of_checkpoint', 'export_config_text', 'load_weights', 'plain_message_hub',
           'restore_message_hub', 'runner_safe_globals', 'saved_model_config', 'without_backbone_checkpoint']

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


def check_checkpoint_fits(model: nn.Module, filename: str, config_name: str) -> None:
    """:func:`check_fits` of the checkpoint ``filename``, reading only its pickle (mapped): for a load that follows
    elsewhere (the runner's ``load_from``), which checks the rest."""
    check_fits(model, read(filename, mmap=True).raw, filename, config_name)


def load_weights(model: nn.Module, checkpoint: Any, filename: str, config_name: str) -> None:
    """Load ``checkpoint`` (``filename`` read whole by the core's :func:`~jetvit_mm.models.checkpoint.read`: weights
    only, its CRCs and tensor digest checked) into ``model``, after :func:`check_fits`; keys beyond the model (a
    distiller's ``teacher.*``) are left out, as mmengine's non-strict load leaves them."""
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
        raise ValueError(f'{filename} does not hold a state dict; pass a checkpoint of tools/train.py')
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
                         + (f'{len(shapes)} mis-shaped (checkpoint vs model) {shapes[:8]}' if shapes else '')
                         + '; pass a checkpoint of this model (a tools/train.py run of the config), or the config the '
                           'checkpoint was trained with')


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


@HOOKS.register_module()
@HOOKS.register_module(name='PlainCheckpointHook')  # its former half, which old configs and checkpoints name
class CheckpointDigestHook(Hook):
    """Save each checkpoint so that any weights-only load reads it and a damaged copy is refused: its runner state
    as plain data (:func:`plain_message_hub`, turned back by :func:`restore_message_hub` when a run loads it), then
    the digest of its tensors in its meta (``meta['tensor_digest']``, which every load through :mod:`jetvit_mm`
    checks). Runs last, after any hook that changes what is saved (an EMA's weights). ``JetViTRunner`` adds it to
    the default hooks (``checkpoint_digest``); declaring it twice does no harm (both steps are idempotent)."""

    priority = 'LOWEST'

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        plain_message_hub(checkpoint)
        with_digest(checkpoint)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        restore_message_hub(checkpoint)


@HOOKS.register_module()
class ArchSpecHook(Hook):
    """Does nothing: the arch spec travels inside the state dict, which is what loading checks. Kept registered so
    that configs which declare it (``default_hooks.arch_spec`` of the bases before 2026-12-05, copied into user configs
    and into the config text of checkpoints written then) still build."""


def config_of_checkpoint(filename: str, raw: Optional[Dict[str, Any]] = None) -> Config:
    """The config saved in ``filename``'s ``meta['cfg']`` (``raw``: the checkpoint read already), read without
    running it; ValueError naming the ``CONFIG CHECKPOINT`` form when the checkpoint holds none (or none with a
    literal ``model``)."""
    if raw is None:
        raw = read(filename, mmap=True).raw
    meta = raw.get('meta') if isinstance(raw, dict) else None
    text = meta.get('cfg') if isinstance(meta, dict) else None
    values = literal_assignments(text) if isinstance(text, str) else {}
    if not isinstance(values.get('model'), dict):
        found = 'no config text (meta["cfg"])' if not isinstance(text, str) else \
            'config text (meta["cfg"]) without a literal `model = dict(...)`'
        raise ValueError(f'{filename} holds {found}, so it cannot be run on its own: give its config too, '
                         f'tools/infer.py CONFIG CHECKPOINT IMAGES... (checkpoints of tools/train.py and the '
                         f'_with_head.pth of tools/export_hybrid.py carry their config)')
    values.pop('_base_', None)
    return without_backbone_checkpoint(Config(values, cfg_text=literal_text(values), filename=str(filename)))


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
