"""Integrity of checkpoint files: a digest of their tensors written with them and checked on load, the CRC-32 of
every record of a zip checkpoint, the digest of every file of a sharded (DCP) checkpoint. torch's own reader checks
none of these: a file with bytes zeroed inside a tensor record loads silently with a changed weight."""
import hashlib
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Dict, Iterator, Optional, Tuple, Union

import torch

__all__ = ['DIGEST_META_KEY', 'DamagedCheckpointError', 'UnsafeCheckpointError', 'check_zip_records',
           'file_digest', 'tensor_digest', 'unpickling_refusal', 'verify_digest', 'verify_file_digests', 'with_digest']

DIGEST_META_KEY = 'tensor_digest'  # in a checkpoint's 'meta': 'sha256:<hex>' of every tensor outside 'meta'
ALGORITHM = 'sha256'
_CHUNK = 1 << 20


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint that torch's weights-only unpickler refuses."""


class DamagedCheckpointError(ValueError):
    """A checkpoint whose bytes changed after it was written (a failed zip CRC, or tensors that no longer match the
    digest written with them)."""


def unpickling_refusal(source: Union[str, Path], refused: Exception) -> Exception:
    """What a user reads when torch's weights-only unpickler stops on ``source`` (never torch's own advice, which
    suggests turning safe loading off): a Python object that is not checkpoint data (a global, a refused call) is
    refused as such, saying what to do instead; anything else is a damaged file."""
    found = re.search(r'GLOBAL ([\w.]+)|(refused [^\n]*?)(?:\n|$)', str(refused))
    if found is None:
        return DamagedCheckpointError(f'{source} is not a readable torch checkpoint: its pickle data is corrupt or '
                                      'truncated (damaged, or not written by torch.save); copy or save it again')
    reason = f'it names the Python global {found.group(1)}' if found.group(1) else found.group(2)
    return UnsafeCheckpointError(
        f'{source} was refused by jetvit_mm\'s checkpoint loader (torch.load with weights_only=True): {reason}. An '
        'mmengine runner checkpoint (its message hub holds HistoryBuffer objects) loads once `import jetvit_mm.mm` has '
        'allowed its data types (still weights-only); any other Python object that is not checkpoint data stays '
        'refused: there is no setting that turns safe loading off. A file from another tool that you trust can be '
        're-saved as a plain state dict (torch.save(model.state_dict(), ...)) or as .safetensors, and loaded from '
        'there')


def _tensors(obj: Any, path: str = '') -> Iterator[Tuple[str, torch.Tensor]]:
    """Every tensor in nested dicts / lists / tuples, with its path, in a fixed order (dict keys sorted)."""
    if torch.is_tensor(obj):
        yield path, obj
    elif isinstance(obj, dict):
        for key in sorted(obj, key=str):
            yield from _tensors(obj[key], f'{path}/{key}')
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from _tensors(item, f'{path}/{i}')


def _tensor_bytes(tensor: torch.Tensor) -> memoryview:
    tensor = tensor.detach()
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    if tensor.is_quantized:
        tensor = tensor.int_repr()
    flat = tensor.cpu().contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else memoryview(b'')


def tensor_digest(obj: Any) -> str:
    """``'sha256:<hex>'`` of every tensor in ``obj`` (a checkpoint, a state dict, nested containers): their paths,
    dtypes, shapes and bytes. A checkpoint's ``meta`` is left out (it holds the digest); other values are not
    tensors and are not covered. The same tensors give the same digest in any file format."""
    h = hashlib.new(ALGORITHM)
    items = {k: v for k, v in obj.items() if k != 'meta'} if isinstance(obj, dict) else obj
    for path, tensor in _tensors(items):
        h.update(f'{path}\0{tensor.dtype}\0{tuple(tensor.shape)}\0'.encode())
        h.update(_tensor_bytes(tensor))
    return f'{ALGORITHM}:{h.hexdigest()}'


def with_digest(checkpoint: dict) -> dict:
    """``checkpoint`` (a dict with tensors, e.g. ``{'state_dict': ..., 'meta': ...}``) with the digest of its tensors
    in ``meta``; changed in place and returned."""
    meta = checkpoint.setdefault('meta', {})
    if not isinstance(meta, dict):
        raise TypeError(f'checkpoint meta must be a dict to hold the digest, got {type(meta).__name__}')
    meta[DIGEST_META_KEY] = tensor_digest(checkpoint)
    return checkpoint


def verify_digest(checkpoint: Any, source: Union[str, Path]) -> None:
    """Refuse a loaded checkpoint whose tensors differ from the digest in its meta (none saved: nothing to check)."""
    meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
    saved = meta.get(DIGEST_META_KEY) if isinstance(meta, dict) else None
    if saved is None:
        return
    if not isinstance(saved, str) or not saved.startswith(f'{ALGORITHM}:'):
        raise DamagedCheckpointError(f'{source}: meta[{DIGEST_META_KEY!r}] is {saved!r}, not a {ALGORITHM} digest '
                                     f'(\'{ALGORITHM}:<hex>\'); the file is damaged or was edited')
    found = tensor_digest(checkpoint)
    if found != saved:
        raise DamagedCheckpointError(
            f'{source} is damaged: its tensors do not match the digest written with them (saved {saved[:23]}..., '
            f'found {found[:23]}...); the file changed after it was written: copy or save it again')


def file_digest(path: Union[str, Path]) -> str:
    """``'sha256:<hex>'`` of a file's bytes (the shards of a sharded checkpoint, whose tensors torch does not
    check)."""
    h = hashlib.new(ALGORITHM)
    with open(path, 'rb') as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return f'{ALGORITHM}:{h.hexdigest()}'


def verify_file_digests(directory: Union[str, Path], digests: Dict[str, str], source: Union[str, Path]) -> None:
    """Refuse the files of ``directory`` that differ from ``digests`` (``{file name: digest}``, recorded in
    ``source``'s meta when they were written), or are missing, naming the file."""
    for name, saved in sorted(digests.items(), key=lambda item: str(item[0])):
        path = Path(directory) / str(name)
        if not isinstance(name, str) or Path(name).name != name or name in ('', '.', '..'):
            raise DamagedCheckpointError(f'{source} records a digest for {name!r}, not a file name; the file is '
                                         'damaged or was edited')
        if not path.is_file():
            raise DamagedCheckpointError(f'{path} is missing: {source} was written with it (copy the whole '
                                         'directory along with the checkpoint)')
        if not isinstance(saved, str) or not saved.startswith(f'{ALGORITHM}:'):
            raise DamagedCheckpointError(f'{source}: the digest recorded for {path} is {saved!r}, not a {ALGORITHM} '
                                         'digest; the file is damaged or was edited')
        found = file_digest(path)
        if found != saved:
            raise DamagedCheckpointError(
                f'{path} does not match the digest recorded for it in {source} (saved {saved[:23]}..., found '
                f'{found[:23]}...): it changed after it was written, or belongs to another checkpoint; copy the '
                'checkpoint and its directory again')


def check_zip_records(path: Union[str, Path, BinaryIO], names: Optional[Tuple[str, ...]] = None,
                      source: Optional[Union[str, Path]] = None) -> None:
    """Check the CRC-32 of every record of the zip checkpoint ``path`` (a file name, or a file open for reading:
    ``source`` names it) (only those ending with one of ``names``, if given); a damaged or truncated file raises
    :class:`DamagedCheckpointError` naming the file and the record."""
    source = path if source is None else source
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError, OSError) as error:
        raise DamagedCheckpointError(f'{source} is not a readable torch checkpoint (damaged or truncated: {error}); '
                                     f'copy or save it again') from None
    with archive:
        for info in archive.infolist():
            if names is not None and not info.filename.endswith(names):
                continue
            try:
                with archive.open(info) as record:
                    while record.read(_CHUNK):
                        pass
            except (zipfile.BadZipFile, EOFError, OSError) as error:
                raise DamagedCheckpointError(f'{source} is damaged: its record {info.filename} fails the zip check '
                                             f'({error}); copy or save it again') from None
