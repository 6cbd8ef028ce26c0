"""Reading external weight files safely."""
import ast
import pickle
import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import torch

from ..mixers import mixing_differences

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


def torch_load(path: Union[str, Path], **kwargs: Any) -> Any:
    """``torch.load(path, **kwargs)`` with a file that is not a readable torch checkpoint (truncated, corrupt, text)
    reported as such, naming the file, instead of torch's internal error; a weights-only refusal is re-raised as is."""
    with open(path, 'rb') as f:
        head = f.read(2)
    if head != b'PK' and head[:1] != b'\x80':  # torch writes a zip archive, or (legacy) a protocol-2+ pickle
        raise ValueError(f'{path} is not a readable torch checkpoint (truncated, corrupt or not a torch file): it '
                         f'starts with {head!r}, neither a zip archive nor a pickle')
    try:
        return torch.load(path, **kwargs)
    except pickle.UnpicklingError:
        raise
    except (RuntimeError, OSError, EOFError, KeyError, ValueError, IndexError, AttributeError) as error:
        raise ValueError(f'{path} is not a readable torch checkpoint (truncated, corrupt or not a torch file): '
                         f'{type(error).__name__}: {error}') from error


def _load_pth(path: Path) -> Any:
    """``torch.load(weights_only=True)``; a file that needs more than torch's default allow-list is retried once with
    the allow-list of mmengine runner checkpoints (their message hub holds HistoryBuffers and numpy arrays), still
    weights-only: :func:`jetvit_mm.mm.checkpoint.load_local_checkpoint`. Anything else stays refused."""
    try:
        return torch_load(path, map_location='cpu', weights_only=True)
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
    cfg = saved_model_cfg(meta, model_key)
    meta = dict(meta)
    if cfg is not None:
        kind = str(cfg.get('type', '')).split('.')[-1]
        if kind == 'JetViTSupernet':
            raise ValueError(f'{path} is a supernet checkpoint ({model_key} is a JetViTSupernet), not one arch: '
                             f'export an arch first (tools/export_hybrid.py CONFIG {path} --arch ARCH --out-dir DIR)')
        if cfg.get('arch') and 'jetvit_arch' not in meta:
            meta['jetvit_arch'] = cfg['arch']
            meta.setdefault('build_args', cfg)  # the window and L options it ran with
    return sub, meta


def check_saved_arch(meta: Dict[str, Any], arch: str, path: Union[str, Path], what: str = 'JetViT') -> None:
    """Refuse to load a hybrid's weights (``meta['jetvit_arch']``) into a model of another arch; W and F layers have
    the same parameters, so the keys alone cannot tell. An all-F checkpoint is the teacher and loads anywhere."""
    saved = meta.get('jetvit_arch')
    if saved is None or set(str(saved)) == {'F'} or saved == arch:
        return
    raise ValueError(f'{path} holds a {what} with arch {saved!r}, but this model has arch {arch!r}: '
                     f'build it with arch={saved!r}')


def saved_backbone_arch(state: Dict[str, torch.Tensor], meta: Dict[str, Any]) -> Dict[str, Any]:
    """``meta`` with ``jetvit_arch`` (and ``build_args``: the window and L options) taken from the run's saved
    config when ``state`` is a runner checkpoint of a model with a JetViT ``backbone`` (an mmseg segmentor / depth
    estimator / mmdet detector) or of a ``JetViTDepthAnything``."""
    if 'jetvit_arch' in meta or not any(k.startswith('backbone.') for k in state):
        return meta
    model = saved_model_cfg(meta)
    backbone = model.get('backbone') if model else None
    if not isinstance(backbone, dict) and model and str(model.get('type', '')).endswith('JetViTDepthAnything'):
        backbone = model  # its JetViT arguments sit at the top level
    arch = backbone.get('arch') if isinstance(backbone, dict) else None
    if not isinstance(arch, str):
        return meta
    return dict(meta, jetvit_arch=arch, build_args=meta.get('build_args', backbone))


def check_saved_mixing(meta: Dict[str, Any], build_args: Dict[str, Any], path: Union[str, Path],
                       what: str = 'JetViT') -> None:
    """Refuse a hybrid whose W window or L options (``meta['build_args']``: an export's, or the run's saved config)
    differ from ``build_args`` (the model's): these options have no parameters of their own, so the weights would
    load and compute something else. Only the options of the letters in ``meta['jetvit_arch']`` count."""
    saved_arch, saved_args = meta.get('jetvit_arch'), meta.get('build_args')
    if not isinstance(saved_arch, str) or not isinstance(saved_args, dict):
        return
    differ = mixing_differences(saved_args, build_args, letters=saved_arch)
    if differ:
        saved = ', '.join(f'{k}={a!r}' for k, (a, _) in differ.items())
        raise ValueError(f'{path} holds a {what} built with {saved}, but this model has '
                         + ', '.join(f'{k}={b!r}' for k, (_, b) in differ.items())
                         + f': build it with the same {", ".join(differ)}')


def saved_model_cfg(meta: Dict[str, Any], model_key: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """``model[model_key]`` (or ``model``) of the config text mmengine's runner saves in a checkpoint's meta, or None.

    The text is parsed, never executed (a checkpoint is untrusted input, and mmengine's ``Config.fromstring``
    runs it): only literals and ``dict(...)`` calls are read; any other expression reads as None.
    """
    text = meta.get('cfg')
    if not isinstance(text, str):
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        warnings.warn(f'could not parse the saved config of the checkpoint ({e}); its arch is not checked',
                      stacklevel=3)
        return None
    model = None
    for node in tree.body:  # the last top-level ``model = ...`` wins, as when the config runs
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == 'model' for t in node.targets):
            model = _literal(node.value)
    sub = model.get(model_key) if isinstance(model, dict) and model_key else model
    return dict(sub) if isinstance(sub, dict) else None


def _literal(node: ast.AST) -> Any:
    """The value of a config expression built from literals, ``dict(...)``, ``{...}``, ``[...]`` and ``(...)``;
    None for anything else (names, other calls, operators), which is never evaluated."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values)
                if k is not None and isinstance(_literal(k), (str, int, float, bool, type(None)))}
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [_literal(v) for v in node.elts]
        return values if isinstance(node, ast.List) else tuple(values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == 'dict' and not node.args:
        return {kw.arg: _literal(kw.value) for kw in node.keywords if kw.arg is not None}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return None
