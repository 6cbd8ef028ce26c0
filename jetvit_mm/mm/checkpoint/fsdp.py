"""Runner checkpoints of an FSDP2-sharded model: a full state dict gathered on rank 0, or sharded files written by every
rank through ``torch.distributed.checkpoint`` (DCP), as ``model_wrapper_cfg.checkpoint`` chooses.

Either way the runner's ``iter_N.pth`` is written (meta, message hub, schedulers, and in ``'full'`` mode the weights and
optimizer state by parameter name); in ``'sharded'`` mode the weights and optimizer state go to the DCP directory
``iter_N.dcp`` next to it, named in ``meta['fsdp2_sharded']``. A single process reads both kinds through
:func:`jetvit_mm.models.checkpoint.read` (:mod:`jetvit_mm.models.checkpoint.sharded`); inside a process group of
several ranks :class:`FSDP2CheckpointHook` checks and loads each rank's shards.
"""
import os
import os.path as osp
import re
import shutil
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from mmengine.hooks import Hook
from mmengine.optim import OptimWrapper
from mmengine.registry import MODEL_WRAPPERS
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from jetvit_mm.models.checkpoint.integrity import DamagedCheckpointError, file_digest
from jetvit_mm.models.checkpoint.sharded import (
    DIGESTS_KEY,
    LOADED_DIR_KEY,
    MODE_KEY,
    SHARDED_KEY,
    SafeFileSystemReader,
    SafeLoadPlanner,
    dcp_load,
    verify_shards,
)

from ..registry import HOOKS

STATE_DICT_TYPES = ('full', 'sharded')
_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)
# optimizer state: candidates never sampled before the save have none (see _drop_unsaved_state)
_FULL_PARTIAL = StateDictOptions(full_state_dict=True, cpu_offload=True, strict=False)


def record_shard_digests(directory: str) -> Dict[str, str]:
    """On every rank (collectives), after ``dcp.save``: the digest of each file of the DCP ``directory`` (shards and
    ``.metadata``), each rank hashing its share of the files, for the ``.pth`` meta (checked on load)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    names = [sorted(n for n in os.listdir(directory) if osp.isfile(osp.join(directory, n))) if rank == 0 else None]
    dist.broadcast_object_list(names, src=0)
    mine = {name: file_digest(osp.join(directory, name)) for name in names[0][rank::world]}
    shares: List[Optional[Dict[str, str]]] = [None] * world
    dist.all_gather_object(shares, mine)
    return {name: digest for share in shares for name, digest in share.items()}


def verify_shards_on_every_rank(directory: str, meta: Dict[str, Any], source: str) -> None:
    """:func:`verify_shards` split over the ranks (collectives); a mismatch found by any rank is raised on all."""
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        verify_shards(directory, meta, source, (rank, world))
        failure = None
    except DamagedCheckpointError as error:
        failure = str(error)
    failures: List[Optional[str]] = [None] * world
    dist.all_gather_object(failures, failure)
    found = next((f for f in failures if f is not None), None)
    if found is not None:
        raise DamagedCheckpointError(found)


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
    directory = osp.join(out_dir, name)
    dcp.save(state, checkpoint_id=directory)
    return dict(state_dict={}, meta={MODE_KEY: 'sharded', SHARDED_KEY: name,
                                     DIGESTS_KEY: record_shard_digests(directory)}, directory=directory)


RUNNER_CHECKPOINT = re.compile(r'^(iter|epoch)_\d+$')  # the stems of mmengine's CheckpointHook files


def remove_orphan_shards(out_dir: str, keep: str) -> List[str]:
    """Remove the ``iter_N.dcp`` / ``epoch_N.dcp`` folders of ``out_dir`` whose ``.pth`` is gone (mmengine's
    ``max_keep_ckpts`` removes the file only): without it a folder cannot be loaded (the ``.pth`` holds its meta and
    digests). ``keep`` (the folder being written now, whose ``.pth`` comes next) stays; so does every other folder.
    Returns the removed paths."""
    removed = []
    for entry in sorted(os.listdir(out_dir)):
        stem, suffix = osp.splitext(entry)
        path = osp.join(out_dir, entry)
        if (suffix == '.dcp' and entry != keep and RUNNER_CHECKPOINT.match(stem) and osp.isdir(path)
                and not osp.exists(osp.join(out_dir, stem + '.pth'))):
            shutil.rmtree(path)
            removed.append(path)
    return removed


@HOOKS.register_module()
class FSDP2CheckpointHook(Hook):
    """Save and load runner checkpoints of an :class:`~jetvit_mm.mm.engine.fsdp.FSDP2Wrapper` model (mode: the wrapper's
    ``checkpoint``; the collectives run in :class:`~jetvit_mm.mm.engine.fsdp.FSDP2Runner`'s ``save_checkpoint`` on every
    rank). ``tools/train.py`` adds it whenever the model is FSDP2-wrapped; it does nothing otherwise.

    Loading takes either kind, and also a single-process checkpoint's weights (``load_from`` / ``--resume``; the
    optimizer state then starts afresh, as its keys are parameter indices, not names).
    """

    priority = 'VERY_LOW'

    @staticmethod
    def _wrapper(runner):
        wrapper_type = MODEL_WRAPPERS.get('FSDP2Wrapper')  # by registry: jetvit_mm.mm.engine.fsdp imports this module
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
        if 'directory' in pending:  # max_keep_ckpts removed an older .pth: its shards go too
            remove_orphan_shards(osp.dirname(pending['directory']), osp.basename(pending['directory']))

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
            verify_shards_on_every_rank(directory, meta, f'the .pth checkpoint that names {directory}')
            state = {'model': get_model_state_dict(model)}
            dcp_load(state, directory, SafeLoadPlanner())  # strict: every weight
            set_model_state_dict(model, state['model'])
            if optim is not None:
                # partial: candidates never sampled before the save have no optimizer state; they get none again
                # (torch's state-dict helpers initialise every parameter's), so their first step is a first step
                saved = {k.split('.', 2)[2].rsplit('.', 1)[0]
                         for k in SafeFileSystemReader(directory).read_metadata().state_dict_metadata
                         if k.startswith('optim.state.')}
                state = {'optim': get_optimizer_state_dict(model, optim)}
                dcp_load(state, directory, SafeLoadPlanner(allow_partial_load=True))
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
