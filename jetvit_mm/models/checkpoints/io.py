"""Reading external weight files safely."""
from pathlib import Path
from typing import Any, Dict, Tuple, Union

import torch

WRAPPER_KEYS = ('state_dict', 'model', 'module', 'teacher')


def read_checkpoint(path: Union[str, Path]) -> Tuple[Dict[str, torch.Tensor], Dict[str, Any]]:
    """``(state dict, meta)``; ``meta`` is the checkpoint's ``'meta'`` dict (exported hybrids name their arch)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f'checkpoint not found: {path}')
    if path.suffix == '.safetensors':
        return read_state_dict(path), {}
    raw = torch.load(path, map_location='cpu', weights_only=True)
    meta = raw.get('meta', {}) if isinstance(raw, dict) and isinstance(raw.get('meta'), dict) else {}
    return _unwrap(raw, path), meta


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
        state = torch.load(path, map_location='cpu', weights_only=True)
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
