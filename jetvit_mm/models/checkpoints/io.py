"""Reading external weight files safely: torch's weights-only unpickler or safetensors, nothing else."""
import pickle
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import torch

from .extensions import fallback_loader
from .formats import strip_wrapper_prefix
from .integrity import check_zip_records, verify_digest

WRAPPER_KEYS = ('state_dict', 'model', 'module', 'teacher')


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint that torch's weights-only unpickler refuses (and no registered loader reads safely)."""


def read_checkpoint(path: Union[str, Path], mmap: bool = False) -> Tuple[Dict[str, torch.Tensor], Dict[str, Any]]:
    """``(state dict, meta)``; ``meta`` is the checkpoint's ``'meta'`` dict (exports name their arch spec there).
    ``mmap``: map a zip ``.pth`` instead of reading it (its tensors read from the file as they are used)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f'checkpoint not found: {path}')
    if path.suffix == '.safetensors':
        return unwrap_state(_load_safetensors(path), path), {}
    raw = _load_pth(path, mmap=mmap)
    meta = raw.get('meta', {}) if isinstance(raw, dict) and isinstance(raw.get('meta'), dict) else {}
    if meta.get('fsdp2_sharded'):  # an FSDP2 runner checkpoint: its weights are in the .dcp directory it names
        loader = fallback_loader()
        if loader is None:
            raise UnsafeCheckpointError(f'{path} is a sharded FSDP2 checkpoint (its weights in '
                                        f'{meta["fsdp2_sharded"]}): `import jetvit_mm.mm` registers its reader')
        raw = loader(str(path))
    return unwrap_state(raw, path), meta


def torch_load(path: Union[str, Path], **kwargs: Any) -> Any:
    """``torch.load(path, **kwargs)`` with the file's integrity checked, the file opened once: a zip checkpoint's
    records must pass their CRC-32 (with ``mmap=True``, which reads little more than the pickle, only the pickle's
    record) and a checkpoint read whole must match the tensor digest in its meta, if it has one (:mod:`.integrity`).
    A file that is not a readable torch checkpoint (truncated, corrupt, text) is reported as such, naming the file,
    instead of torch's internal error; a weights-only refusal is re-raised as is. A legacy (non-zip) file is read
    whole also when ``mmap=True`` is asked (torch maps only zip files)."""
    with open(path, 'rb') as f:
        head = f.read(2)
        if head != b'PK' and head[:1] != b'\x80':  # torch writes a zip archive, or (legacy) a protocol-2+ pickle
            raise ValueError(f'{path} is not a readable torch checkpoint (truncated, corrupt or not a torch file): it '
                             f'starts with {head!r}, neither a zip archive nor a pickle')
        if head == b'PK':
            f.seek(0)
            check_zip_records(f, names=('data.pkl',) if kwargs.get('mmap') else None, source=path)
        else:
            kwargs['mmap'] = False
        f.seek(0)
        checkpoint = _checked_load(path if kwargs.get('mmap') else f, path, kwargs)  # torch maps a file by its name
    if not kwargs.get('mmap'):
        verify_digest(checkpoint, path)
    return checkpoint


def _checked_load(file: Any, path: Union[str, Path], kwargs: Dict[str, Any]) -> Any:
    """``torch.load(file, **kwargs)``; its errors on a file that is not a torch checkpoint worded naming ``path``."""
    try:
        return torch.load(file, **kwargs)
    except pickle.UnpicklingError:
        raise
    except (RuntimeError, OSError, EOFError, KeyError, ValueError, IndexError, AttributeError) as error:
        raise ValueError(f'{path} is not a readable torch checkpoint (truncated, corrupt or not a torch file): '
                         f'{type(error).__name__}: {error}') from error


def _load_pth(path: Path, mmap: bool = False) -> Any:
    """``torch.load(weights_only=True)``. A file that needs more than torch's allow-list is retried once with the
    registered runner-checkpoint loader (:func:`~jetvit_mm.models.checkpoints.extensions.register_fallback_loader`,
    which ``import jetvit_mm.mm`` fills in: still weights-only). Anything else stays refused."""
    try:
        return torch_load(path, map_location='cpu', weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as refused:
        loader = fallback_loader()
        if loader is None:
            raise UnsafeCheckpointError(
                f'{path} was refused by safe loading (torch.load with weights_only=True): {refused}\n'
                'An mmengine runner checkpoint (its message hub holds HistoryBuffer objects) loads after '
                '`import jetvit_mm.mm`, which registers the runner-checkpoint loader (still weights-only); any other '
                'file stays refused') from None
        try:
            return loader(str(path))
        except UnsafeCheckpointError as own:  # the loader's own refusal, worded (of this file, or of a file of the
            raise own from None  # sharded checkpoint it points at)
        except pickle.UnpicklingError:
            raise refused from None


def _load_safetensors(path: Path) -> Dict[str, torch.Tensor]:
    """The tensors of a ``.safetensors`` file, parsed by safetensors (which never unpickles). A file it cannot parse
    is refused with the file named: as a torch checkpoint under that name when it starts like one (a zip archive or
    a pickle), else as not readable (truncated, random bytes). The first bytes are looked at only to word that
    error: a valid file's header length (its first 8 bytes) may start with any bytes, ``PK`` and 0x80 included."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device='cpu')
    except (SafetensorError, OSError) as error:
        failure = error
    with open(path, 'rb') as f:
        head = f.read(2)
    kind = _torch_file_kind(head)
    if kind is not None:
        raise ValueError(f'{path} is named .safetensors but holds a torch checkpoint ({kind}), not safetensors; '
                         f'if it is one, rename it .pth to load it with torch.load(weights_only=True)')
    raise ValueError(f'{path} is not a readable .safetensors file (truncated, corrupt or another format): '
                     f'{failure}')


def _torch_file_kind(head: bytes) -> Optional[str]:
    """``'a zip archive'`` or ``'a pickle'`` when ``head`` (a file's first two bytes) starts a torch checkpoint (a
    zip, or a legacy pickle: the PROTO opcode 0x80 and a protocol 2-5), else None."""
    if head == b'PK':
        return 'a zip archive'
    if len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return 'a pickle'
    return None


def unwrap_state(state: Any, path: Union[str, Path]) -> Dict[str, torch.Tensor]:
    """The state dict of tensors of a loaded checkpoint (under one of :data:`WRAPPER_KEYS`, or itself), without a
    DistributedDataParallel ``module.`` prefix; ValueError naming ``path`` when it holds none."""
    for key in WRAPPER_KEYS:
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
            break
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ValueError(f'{path} does not hold a state dict of tensors')
    return dict(strip_wrapper_prefix(state))


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
