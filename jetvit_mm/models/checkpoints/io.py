"""Reading external weight files safely."""
from pathlib import Path
from typing import Dict, Union

import torch

WRAPPER_KEYS = ('state_dict', 'model', 'module', 'teacher')


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
    for key in WRAPPER_KEYS:
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
            break
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ValueError(f'{path} does not hold a state dict of tensors')
    if all(k.startswith('module.') for k in state):
        state = {k[len('module.'):]: v for k, v in state.items()}
    return dict(state)
