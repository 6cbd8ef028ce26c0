"""Runner checkpoints of an FSDP2-sharded model: a full state dict gathered on rank 0, or sharded files written by every
rank through ``torch.distributed.checkpoint`` (DCP), as ``model_wrapper_cfg.checkpoint`` chooses.

Either way the runner's ``iter_N.pth`` is written (meta, message hub, schedulers, and in ``'full'`` mode the weights and
optimizer state by parameter name); in ``'sharded'`` mode the weights and optimizer state go to the DCP directory
``iter_N.dcp`` next to it, named in ``meta['fsdp2_sharded']``. A single process (``tools/test.py``, ``tools/search.py``,
the export, ``JetViT(checkpoint=...)``) reads both kinds: :func:`fill_sharded_state` gathers a DCP directory's
tensors into ``state_dict`` when :func:`~jetvit_mm.mm.checkpoint.load_local_checkpoint` loads the ``.pth``.
"""
import os.path as osp
import pickle
from typing import Any, Dict

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from mmengine.hooks import Hook
from mmengine.optim import OptimWrapper
from mmengine.registry import MODEL_WRAPPERS
from torch.distributed.checkpoint import DefaultLoadPlanner, FileSystemReader
from torch.distributed.checkpoint.metadata import TensorStorageMetadata
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from .registry import HOOKS

SHARDED_KEY = 'fsdp2_sharded'  # meta: the DCP directory, relative to the .pth
LOADED_DIR_KEY = 'fsdp2_sharded_dir'  # meta, set on load: that directory's absolute path
MODE_KEY = 'fsdp2'  # meta: 'full' or 'sharded'
STATE_DICT_TYPES = ('full', 'sharded')
_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)
# optimizer state: candidates never sampled before the save have none (see _drop_unsaved_state)
_FULL_PARTIAL = StateDictOptions(full_state_dict=True, cpu_offload=True, strict=False)


class _MetadataUnpickler(pickle.Unpickler):
    """DCP writes its ``.metadata`` with plain pickle: read it allowing only DCP's metadata classes and torch's
    sizes / dtypes, so a tampered directory cannot run code (the tensors themselves are read weights-only by DCP)."""

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith('torch.distributed.checkpoint.') or (module, name) in {
                ('torch', 'Size'), ('collections', 'OrderedDict'), ('pathlib', 'PosixPath'),
                ('pathlib', 'PurePosixPath'), ('torch.serialization', '_get_layout')}:
            return super().find_class(module, name)
        if module == 'torch' and isinstance(getattr(torch, name, None), (torch.dtype, torch.layout,
                                                                         torch.memory_format)):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f'refused {module}.{name} in a DCP metadata file: only checkpoint metadata '
                                     'classes and torch sizes / dtypes are allowed')


class SafeFileSystemReader(FileSystemReader):
    """DCP's file reader with the restricted metadata unpickler."""

    def read_metadata(self, *args: Any, **kwargs: Any):
        rank = kwargs.get('rank')
        with self.fs.create_stream(self._get_metadata_path(rank), 'rb') as f:
            metadata = _MetadataUnpickler(f).load()
        if getattr(metadata, 'storage_meta', None) is None:
            from torch.distributed.checkpoint.metadata import StorageMeta
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


def read_sharded_model_state(directory: str) -> Dict[str, torch.Tensor]:
    """The full model state dict of a DCP directory, in one process (no process group needed)."""
    reader = SafeFileSystemReader(directory)
    metadata = reader.read_metadata()
    state = {k: torch.empty(m.size, dtype=m.properties.dtype) for k, m in metadata.state_dict_metadata.items()
             if k.startswith('model.') and isinstance(m, TensorStorageMetadata)}
    dcp.load(state, storage_reader=reader, no_dist=True)
    return {k[len('model.'):]: v for k, v in state.items()}


def fill_sharded_state(checkpoint: Any, filename: str) -> Any:
    """A runner checkpoint of ``'sharded'`` mode with its DCP directory's absolute path in its meta and, outside a
    process group of several ranks, ``state_dict`` read from that directory (inside one,
    :class:`FSDP2CheckpointHook` loads each rank's shards); anything else unchanged."""
    if not isinstance(checkpoint, dict):
        return checkpoint
    meta = checkpoint.get('meta') or {}
    if meta.get(MODE_KEY) != 'sharded' or checkpoint.get('state_dict'):
        return checkpoint
    directory = osp.join(osp.dirname(osp.abspath(filename)), meta[SHARDED_KEY])
    if not osp.isdir(directory):
        raise FileNotFoundError(f'{filename} keeps its weights in the sharded checkpoint {directory}, which is missing '
                                '(copy the .dcp directory along with the .pth)')
    meta[LOADED_DIR_KEY] = directory
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        checkpoint['state_dict'] = read_sharded_model_state(directory)
    return checkpoint


def gather_checkpoint_state(wrapper, optim_wrapper, out_dir: str, filename: str, save_optimizer: bool) -> dict:
    """On every rank (collectives): the model and optimizer state of an FSDP2 checkpoint. ``'full'``: gathered on
    rank 0 by parameter name; ``'sharded'``: written by every rank to ``<filename stem>.dcp`` in ``out_dir``."""
    model = wrapper.module
    optim = optim_wrapper.optimizer if save_optimizer and isinstance(optim_wrapper, OptimWrapper) else None
    if wrapper.checkpoint == 'full':
        out = dict(state_dict=get_model_state_dict(model, options=_FULL), meta={MODE_KEY: 'full'})
        if optim is not None:
            out['optimizer'] = get_optimizer_state_dict(model, optim, options=_FULL)
        return out
    name = osp.splitext(osp.basename(filename))[0] + '.dcp'
    state = {'model': get_model_state_dict(model)}
    if optim is not None:
        state['optim'] = get_optimizer_state_dict(model, optim)
    dcp.save(state, checkpoint_id=osp.join(out_dir, name))
    return dict(state_dict={}, meta={MODE_KEY: 'sharded', SHARDED_KEY: name})


@HOOKS.register_module()
class FSDP2CheckpointHook(Hook):
    """Save and load runner checkpoints of an :class:`~jetvit_mm.mm.fsdp.FSDP2Wrapper` model (mode: the wrapper's
    ``checkpoint``; the collectives run in :class:`~jetvit_mm.mm.fsdp.FSDP2Runner`'s ``save_checkpoint`` on every
    rank). ``tools/train.py`` adds it whenever the model is FSDP2-wrapped; it does nothing otherwise.

    Loading takes either kind, and also a single-process checkpoint's weights (``load_from`` / ``--resume``; the
    optimizer state then starts afresh, as its keys are parameter indices, not names).
    """

    priority = 'VERY_LOW'

    @staticmethod
    def _wrapper(runner):
        wrapper_type = MODEL_WRAPPERS.get('FSDP2Wrapper')  # by registry: jetvit_mm.mm.fsdp imports this module
        return runner.model if wrapper_type is not None and isinstance(runner.model, wrapper_type) else None

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Rank 0 only (mmengine's ``save_checkpoint`` is master-only): put in what
        :func:`gather_checkpoint_state` collected on every rank."""
        pending = getattr(runner, 'fsdp2_pending', None)
        if self._wrapper(runner) is None or pending is None:
            return
        checkpoint['state_dict'] = pending['state_dict']
        if 'optimizer' in pending and 'optimizer' in checkpoint:
            checkpoint['optimizer'] = pending['optimizer']
        else:
            checkpoint.pop('optimizer', None)
        checkpoint.setdefault('meta', {}).update(pending['meta'])

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        """Load into the sharded model here (mmengine's own loader cannot fill DTensors); hand mmengine back the
        model's own state, so that its copy is a no-op, and no optimizer state to load again."""
        wrapper = self._wrapper(runner)
        if wrapper is None:
            return
        model, meta = wrapper.module, checkpoint.get('meta') or {}
        optim = runner.optim_wrapper.optimizer if isinstance(runner.optim_wrapper, OptimWrapper) else None
        if meta.get(MODE_KEY) == 'sharded' and not checkpoint.get('state_dict'):
            directory = meta[LOADED_DIR_KEY]
            state = {'model': get_model_state_dict(model)}
            dcp.load(state, storage_reader=SafeFileSystemReader(directory))  # strict: every weight
            set_model_state_dict(model, state['model'])
            if optim is not None:
                # partial: candidates never sampled before the save have no optimizer state; they get none again
                # (torch's state-dict helpers initialise every parameter's), so their first step is a first step
                reader = SafeFileSystemReader(directory)
                saved = {k.split('.', 2)[2].rsplit('.', 1)[0] for k in reader.read_metadata().state_dict_metadata
                         if k.startswith('optim.state.')}
                state = {'optim': get_optimizer_state_dict(model, optim)}
                dcp.load(state, storage_reader=reader, planner=DefaultLoadPlanner(allow_partial_load=True))
                set_optimizer_state_dict(model, optim, state['optim'])
                _drop_unsaved_state(model, optim, saved)
        else:
            set_model_state_dict(model, checkpoint['state_dict'], options=_FULL)
            if optim is not None and meta.get(MODE_KEY) == 'full' and 'optimizer' in checkpoint:
                saved = set(checkpoint['optimizer'].get('state', {}))  # by parameter name
                set_optimizer_state_dict(model, optim, checkpoint['optimizer'], options=_FULL_PARTIAL)
                _drop_unsaved_state(model, optim, saved)
        checkpoint['state_dict'] = model.state_dict()
        checkpoint.pop('optimizer', None)


def _drop_unsaved_state(model: torch.nn.Module, optim: torch.optim.Optimizer, saved: set) -> None:
    """Candidates never sampled before the save had no optimizer state; torch's state-dict helpers initialise every
    parameter's, so take it away again: their first step after the resume is a first step, as without the kill."""
    for name, param in model.named_parameters():
        if name not in saved:
            optim.state.pop(param, None)
