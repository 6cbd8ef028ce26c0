"""Reading the sharded (DCP, ``torch.distributed.checkpoint``) checkpoint an FSDP2 runner checkpoint of ``'sharded'``
mode names: its ``.pth`` holds meta, message hub and schedulers, its weights and optimizer state sit in the DCP
directory ``iter_N.dcp`` next to it (``meta['fsdp2_sharded']``), every file of which has its digest in the ``.pth``
meta (``meta['fsdp2_sharded_digests']``), checked before the directory is read.

Reading a DCP directory never runs code from it: its ``.metadata`` pickle may name only an allow-list of exact globals,
and the byte entries (optimizer hyper-parameters) are read weights-only (:class:`SafeLoadPlanner`; DCP's own planner
reads them with ``weights_only=False``). Every error names its file. Pure torch: the runner side is
:mod:`jetvit_mm.mm.checkpoint.fsdp`.
"""
import collections
import dataclasses
import functools
import io
import os.path as osp
import pathlib
import pickle
from typing import Any, BinaryIO, Dict, Tuple

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import CheckpointException, DefaultLoadPlanner, FileSystemReader
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta, TensorStorageMetadata
from torch.distributed.checkpoint.planner import LoadPlan, LoadPlanner, ReadItem
from torch.futures import Future

from .integrity import DamagedCheckpointError, UnsafeCheckpointError, unpickling_refusal, verify_file_digests

SHARDED_KEY = 'fsdp2_sharded'  # meta: the DCP directory, relative to the .pth
LOADED_DIR_KEY = 'fsdp2_sharded_dir'  # meta, set on load: that directory's absolute path
MODE_KEY = 'fsdp2'  # meta: 'full' or 'sharded'
DIGESTS_KEY = 'fsdp2_sharded_digests'  # meta: {file of the DCP directory: 'sha256:<hex>'}, checked on load


@functools.cache
def _metadata_globals() -> Dict[Tuple[str, str], Any]:
    """Every global a DCP ``.metadata`` file may name, as exact ``(module, name)`` pairs: DCP's metadata classes,
    torch sizes, dtypes and layouts, and the path / ordered-dict types of its storage meta. Nothing by prefix and no
    dotted name (pickle resolves ``module``, ``'a.b'`` attribute by attribute, which reaches any module imported
    there)."""
    from torch.distributed.checkpoint import filesystem, metadata

    allowed = {('torch.distributed.checkpoint.metadata', name): getattr(metadata, name, None)
               for name in ('Metadata', 'StorageMeta', 'TensorStorageMetadata', 'BytesStorageMetadata',
                            'ChunkStorageMetadata', 'TensorProperties', 'MetadataIndex', '_MEM_FORMAT_ENCODING')}
    allowed.update({('torch.distributed.checkpoint.filesystem', '_StorageInfo'): filesystem._StorageInfo,
                    ('torch', 'Size'): torch.Size,
                    ('torch.serialization', '_get_layout'): torch.serialization._get_layout,
                    ('collections', 'OrderedDict'): collections.OrderedDict,
                    ('pathlib', 'PosixPath'): pathlib.PosixPath, ('pathlib', 'PurePosixPath'): pathlib.PurePosixPath})
    allowed.update({('torch', name): value for name, value in vars(torch).items()
                    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format))})
    return {key: value for key, value in allowed.items() if value is not None}


class _MetadataUnpickler(pickle.Unpickler):
    """DCP writes its ``.metadata`` with plain pickle: read it allowing only the exact globals of
    :func:`_metadata_globals`, so a tampered directory cannot run code (the tensors are read weights-only by DCP, the
    byte entries by :class:`SafeLoadPlanner`)."""

    def __init__(self, file: BinaryIO, source: str) -> None:
        super().__init__(file)
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        found = _metadata_globals().get((module, name))
        if found is None:
            raise UnsafeCheckpointError(f'{self.source}: refused the Python global {module}.{name} in a DCP metadata '
                                        'file: only checkpoint metadata classes and torch sizes / dtypes are allowed; '
                                        'the file was tampered with or is not a DCP checkpoint\'s metadata')
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeCheckpointError(f'{self.source}: refused a persistent id in a DCP metadata file')


class SafeLoadPlanner(DefaultLoadPlanner):
    """DCP's load planner reading the byte entries (non-tensor values: optimizer hyper-parameters, ...) with
    ``torch.load(weights_only=True)`` where DCP's own uses ``weights_only=False``: a pickled object in an entry is
    refused, never run."""

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        fqn = read_item.dest_index.fqn
        try:
            loaded = torch.load(value, weights_only=True)
        except pickle.UnpicklingError as refused:
            raise unpickling_refusal(f'its entry {fqn!r}', refused) from None
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[fqn], loaded)
        else:
            self.state_dict[fqn] = loaded


class SafeFileSystemReader(FileSystemReader):
    """DCP's file reader with the restricted metadata unpickler; every error names the file it comes from."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        path = str(self._get_metadata_path(kwargs.get('rank')))
        try:
            with self.fs.create_stream(path, 'rb') as f:
                metadata = _MetadataUnpickler(f, path).load()
        except UnsafeCheckpointError:
            raise
        except FileNotFoundError:
            raise FileNotFoundError(f'{path}: the sharded checkpoint has no metadata file (not a DCP directory, or '
                                    'an incomplete copy)') from None
        except Exception as error:  # a truncated or damaged pickle fails in many ways
            raise DamagedCheckpointError(f'{path} is not a readable DCP metadata file (truncated or damaged: '
                                         f'{type(error).__name__}: {error}); copy the .dcp directory again') from None
        _check_storage_files(metadata, path)
        if getattr(metadata, 'storage_meta', None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future:
        """DCP's read, one shard file at a time, so that an error names its file."""
        by_file: Dict[str, list] = {}
        for item in plan.items:
            if item.storage_index not in self.storage_data:
                raise DamagedCheckpointError(f'{self._get_metadata_path()} lists {item.storage_index.fqn!r} without '
                                             'the file that holds it; the metadata is damaged')
            by_file.setdefault(self.storage_data[item.storage_index].relative_path, []).append(item)
        for name, items in by_file.items():
            path = osp.join(str(self.path), name)
            try:
                super().read_data(dataclasses.replace(plan, items=items), planner).wait()
            except UnsafeCheckpointError as refused:
                raise UnsafeCheckpointError(f'{path}: {refused}') from None
            except Exception as error:
                raise DamagedCheckpointError(f'{path} (a shard of the sharded checkpoint {self.path}) cannot be read '
                                             f'(truncated or damaged: {type(error).__name__}: {error}); copy the .dcp '
                                             'directory again') from None
        done: Future = Future()
        done.set_result(None)
        return done


def _check_storage_files(metadata: Any, path: str) -> None:
    """The metadata of a DCP directory names only files in that directory (plain names)."""
    storage = getattr(metadata, 'storage_data', None) if isinstance(metadata, Metadata) else None
    if not isinstance(storage, dict):
        raise DamagedCheckpointError(f'{path} is not a DCP metadata file (it holds {type(metadata).__name__} without '
                                     'storage entries)')
    for info in storage.values():
        name = getattr(info, 'relative_path', None)
        if not isinstance(name, str) or name in ('', '.', '..') or osp.basename(name) != name:
            raise DamagedCheckpointError(f'{path} names the shard file {name!r}, not a file of its own directory; '
                                         'the metadata was tampered with or is damaged')


def dcp_load(state: Dict[str, Any], directory: str, planner: LoadPlanner, no_dist: bool = False) -> None:
    """``dcp.load`` with :class:`SafeFileSystemReader`; an error on any rank is raised on every rank, naming the file
    (or, for a state that does not fit, the directory)."""
    SafeFileSystemReader(directory).read_metadata()  # a missing, damaged or refused .metadata, named (DCP would
    # fall back to per-rank metadata files and report that none is found)
    try:
        dcp.load(state, storage_reader=SafeFileSystemReader(directory), planner=planner, no_dist=no_dist)
    except CheckpointException as error:
        raise _named(next(iter(error.failures.values()))[0], directory) from None
    except Exception as error:
        raise _named(error, directory) from None


def _named(error: BaseException, directory: str) -> BaseException:
    if isinstance(error, (UnsafeCheckpointError, DamagedCheckpointError, FileNotFoundError)):
        return error  # already names its file
    return ValueError(f'the sharded checkpoint {directory} does not fit: {type(error).__name__}: {error}')


def verify_shards(directory: str, meta: Dict[str, Any], source: str, share: Tuple[int, int] = (0, 1)) -> None:
    """Refuse a DCP directory whose files do not match the digests recorded in the ``.pth`` meta (``share``:
    ``(rank, world)``, this rank's part of the files); a checkpoint written before digests has none to check."""
    digests = meta.get(DIGESTS_KEY)
    if digests is None:
        return
    if not isinstance(digests, dict):
        raise DamagedCheckpointError(f'{source}: meta[{DIGESTS_KEY!r}] is {type(digests).__name__}, not a dict of '
                                     'file digests; the file is damaged or was edited')
    names = sorted(digests, key=str)[share[0]::share[1]]
    verify_file_digests(directory, {name: digests[name] for name in names}, source)



def read_sharded_model_state(directory: str) -> Dict[str, torch.Tensor]:
    """The full model state dict of a DCP directory, in one process (no process group needed)."""
    reader = SafeFileSystemReader(directory)
    metadata = reader.read_metadata()
    try:
        state = {k: torch.empty(m.size, dtype=m.properties.dtype) for k, m in metadata.state_dict_metadata.items()
                 if k.startswith('model.') and isinstance(m, TensorStorageMetadata)}
    except (AttributeError, TypeError, RuntimeError) as error:
        raise DamagedCheckpointError(f'{reader._get_metadata_path()} does not describe its tensors as DCP does '
                                     f'({type(error).__name__}: {error}); the metadata is damaged') from None
    dcp_load(state, directory, SafeLoadPlanner(), no_dist=True)
    return {k[len('model.'):]: v for k, v in state.items()}


def fill_sharded_state(checkpoint: Any, filename: str) -> Any:
    """A runner checkpoint of ``'sharded'`` mode with its DCP directory's absolute path in its meta and, outside a
    process group of several ranks, its shards checked against the digests in its meta and ``state_dict`` read from
    that directory (inside one, :class:`FSDP2CheckpointHook` checks and loads each rank's shards); anything else
    unchanged."""
    if not isinstance(checkpoint, dict):
        return checkpoint
    meta = checkpoint.get('meta') or {}
    if meta.get(MODE_KEY) != 'sharded' or checkpoint.get('state_dict'):
        return checkpoint
    name = meta.get(SHARDED_KEY)
    if not isinstance(name, str) or name in ('', '.', '..') or osp.basename(name) != name:
        raise DamagedCheckpointError(f'{filename}: meta[{SHARDED_KEY!r}] is {name!r}, not the name of a .dcp '
                                     'directory next to it; the file is damaged or was edited')
    directory = osp.join(osp.dirname(osp.abspath(filename)), name)
    if not osp.isdir(directory):
        raise FileNotFoundError(f'{filename} keeps its weights in the sharded checkpoint {directory}, which is missing '
                                '(copy the .dcp directory along with the .pth)')
    meta[LOADED_DIR_KEY] = directory
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        verify_shards(directory, meta, filename)
        checkpoint['state_dict'] = read_sharded_model_state(directory)
    return checkpoint


