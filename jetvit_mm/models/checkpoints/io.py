"""Reading external weight files safely."""
import pickle
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import torch

WRAPPER_KEYS = ('state_dict', 'model', 'module', 'teacher')
# mmengine runner checkpoints that hold one JetViT: key prefix -> the model config key that built it
RUNNER_PREFIXES = (('student.', 'student'), ('backbone.', 'backbone'))


def read_checkpoint(path: Union[str, Path]) -> Tuple[Dict[str, torch.Tensor], Dict[str, Any]]:
    """``(state dict, meta)``; ``meta`` is the checkpoint's ``'meta'`` dict (exported hybrids name their arch)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f'checkpoint not found: {path}')
    if path.suffix == '.safetensors':
        return read_state_dict(path), {}
    raw = _load_pth(path)
    meta = raw.get('meta', {}) if isinstance(raw, dict) and isinstance(raw.get('meta'), dict) else {}
    return _unwrap(raw, path), meta


def _load_pth(path: Path) -> Any:
    """``torch.load(weights_only=True)``; a file that needs more than torch's default allow-list is retried once with
    the allow-list of mmengine runner checkpoints (their message hub holds HistoryBuffers and numpy arrays), still
    weights-only: :func:`jetvit_mm.mm.checkpoint.load_local_checkpoint`. Anything else stays refused."""
    try:
        return torch.load(path, map_location='cpu', weights_only=True)
    except pickle.UnpicklingError as refused:
        from jetvit_mm.mm.checkpoint import load_local_checkpoint
        try:
            return load_local_checkpoint(str(path), map_location='cpu')
        except pickle.UnpicklingError:
            raise refused from None


def read_state_dict(path: Union[str, Path]) -> Dict[str, torch.Tensor]:
    """Tensors of a ``.safetensors`` file, or of a ``.pth``/``.pt``/``.bin`` read with ``weights_only=True``.

    A checkpoint that wraps its weights (``{'state_dict': ...}``, ``{'model': ...}``) is unwrapped, and a
    ``module.`` prefix left by DistributedDataParallel is removed.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f'checkpoint not found: {path}')
    if path.suffix == '.safetensors':
        from safetensors.torch import load_file
        state = load_file(str(path), device='cpu')
    else:
        state = _load_pth(path)
    return _unwrap(state, path)


def _unwrap(state: Any, path: Path) -> Dict[str, torch.Tensor]:
    for key in WRAPPER_KEYS:
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
            break
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ValueError(f'{path} does not hold a state dict of tensors')
    if all(k.startswith('module.') for k in state):
        state = {k[len('module.'):]: v for k, v in state.items()}
    return dict(state)


def check_state_keys(own: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor], target: str, source: str,
                     optional: Sequence[str] = ()) -> None:
    """Raise RuntimeError naming the missing, unexpected and mis-shaped keys of ``state`` against a model's own state
    dict ``own`` (``optional`` keys may be absent); ``target`` names the model, ``source`` the checkpoint."""
    optional = set(optional)
    missing = sorted(k for k in own if k not in state and k not in optional)
    unexpected = sorted(k for k in state if k not in own)
    wrong_shape = sorted(f'{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}'
                         for k, v in state.items() if k in own and v.shape != own[k].shape)
    if not (missing or unexpected or wrong_shape):
        return
    lines = [f'cannot load {source} into {target}']
    for title, keys in (('missing keys', missing), ('unexpected keys', unexpected), ('shape mismatches', wrong_shape)):
        if keys:
            shown = ', '.join(keys[:12]) + (f', ... ({len(keys)} in all)' if len(keys) > 12 else '')
            lines.append(f'{title}: {shown}')
    raise RuntimeError('\n'.join(lines))


def runner_backbone(state: Dict[str, torch.Tensor], meta: Dict[str, Any],
                    path: Union[str, Path]) -> Tuple[Dict[str, torch.Tensor], Dict[str, Any]]:
    """The JetViT inside an mmengine runner checkpoint, else ``(state, meta)`` unchanged.

    A fine-tuned distiller holds its JetViT under ``student.`` (next to the teacher's ``teacher.`` weights), a
    segmentor / depth model / detector under ``backbone.``. Returns those weights with the prefix removed and
    ``meta['jetvit_arch']`` set from the run's saved config (``meta['cfg']``), so that loading into a different
    arch is refused even between W and F layers, which have the same parameters. A supernet's checkpoint holds no
    single arch and is refused.
    """
    found = [(p, m) for p, m in RUNNER_PREFIXES if any(k.startswith(p) for k in state)]
    if not found:
        return state, meta
    prefix, model_key = found[0]
    sub = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    cfg = _saved_model_cfg(meta, model_key)
    meta = dict(meta)
    if cfg is not None:
        kind = str(cfg.get('type', '')).split('.')[-1]
        if kind == 'JetViTSupernet':
            raise ValueError(f'{path} is a supernet checkpoint ({model_key} is a JetViTSupernet), not one arch: '
                             f'export an arch first (tools/export_hybrid.py CONFIG {path} --arch ARCH --out-dir DIR)')
        if cfg.get('arch') and 'jetvit_arch' not in meta:
            meta['jetvit_arch'] = cfg['arch']
    return sub, meta


def _saved_model_cfg(meta: Dict[str, Any], model_key: str) -> Optional[Dict[str, Any]]:
    """``model[model_key]`` of the config text mmengine's runner saves in a checkpoint's meta, or None."""
    text = meta.get('cfg')
    if not isinstance(text, str):
        return None
    from mmengine.config import Config

    try:
        model = Config.fromstring(text, '.py').get('model') or {}
    except Exception as e:  # a config the installed packages cannot parse: keys are still checked strictly
        import warnings
        warnings.warn(f'could not read the saved config of the checkpoint ({e}); its arch is not checked',
                      stacklevel=3)
        return None
    sub = model.get(model_key)
    return dict(sub) if sub is not None else None
