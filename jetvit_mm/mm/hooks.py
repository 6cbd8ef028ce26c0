"""Runner hooks: single-path supernet sampling, the runner's state saved as plain data, and the digest of the
checkpoint's tensors. The last two are declared in every config through
``configs/_base_/default_runtime.py`` / ``det_runtime.py`` (``default_hooks``), so that mmseg's and mmdet's own
tools write the same checkpoints as this project's."""
import json
import os.path as osp
from typing import Optional

from mmengine.dist import broadcast_object_list, is_distributed
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from jetvit_mm.models.checkpoint.integrity import with_digest
from jetvit_mm.models.supernet import JetViTSupernet
from jetvit_mm.search import SupernetSampler

from .checkpoint import plain_message_hub, restore_message_hub
from .registry import HOOKS


def find_supernet(model) -> JetViTSupernet:
    """The one :class:`JetViTSupernet` inside ``model`` (wrappers included)."""
    if is_model_wrapper(model):
        model = model.module
    found = [m for m in model.modules() if isinstance(m, JetViTSupernet)]
    if len(found) != 1:
        raise RuntimeError(f'expected exactly one JetViTSupernet in the model, found {len(found)}')
    return found[0]


@HOOKS.register_module()
class SupernetSamplerHook(Hook):
    """Activate one random path of the supernet before every training iteration.

    The path of iteration ``i`` depends only on ``(seed, i)`` (seed: the runner's on rank 0, sent to every rank, as
    ``randomness.diff_rank_seed=True`` makes the runner's seeds differ), so all ranks train the same path and
    ``--resume`` continues the same sequence.

    Args:
        mode: ``'uniform'`` or ``'budgeted'`` (see :class:`~jetvit_mm.search.SupernetSampler`).
        min_full, max_full: F-layer budget for ``'budgeted'``.
        seed: overrides the runner's seed.
        log_paths: append ``{"iter", "rank", "arch"}`` lines to ``work_dir/supernet_paths.rank{R}.jsonl``.
    """

    priority = 'VERY_HIGH'

    def __init__(self, mode: str = 'uniform', min_full: int = 0, max_full: Optional[int] = None,
                 seed: Optional[int] = None, log_paths: bool = True) -> None:
        self.mode, self.min_full, self.max_full, self.seed = mode, min_full, max_full, seed
        self.log_paths = log_paths
        self.sampler: Optional[SupernetSampler] = None

    def before_train(self, runner) -> None:
        supernet = find_supernet(runner.model)
        seed = self.seed if self.seed is not None else (runner.seed or 0)
        if is_distributed():  # randomness.diff_rank_seed=True gives each rank its own seed: take rank 0's
            box = [seed]
            broadcast_object_list(box, src=0)
            seed = box[0]
        self.sampler = SupernetSampler(supernet.search_space, seed=seed, mode=self.mode, min_full=self.min_full,
                                       max_full=self.max_full)

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        arch = self.sampler.sample(runner.iter)
        find_supernet(runner.model).set_arch(arch)
        runner.message_hub.update_info('supernet_arch', arch)
        if self.log_paths:
            path = osp.join(runner.work_dir, f'supernet_paths.rank{runner.rank}.jsonl')
            with open(path, 'a') as f:
                f.write(json.dumps(dict(iter=runner.iter, rank=runner.rank, arch=arch)) + '\n')


@HOOKS.register_module()
class ArchSpecHook(Hook):
    """Does nothing: the arch spec travels inside the state dict, which is what loading checks. Kept registered so
    that configs which declare it (``default_hooks.arch_spec`` of the bases before 2026-12-05, copied into user configs
    and into the config text of checkpoints written then) still build."""


@HOOKS.register_module()
class PlainCheckpointHook(Hook):
    """Save the runner's state as plain data (:func:`~jetvit_mm.mm.checkpoint.plain_message_hub`: the message
    hub's HistoryBuffers and numpy values as lists and numbers), so that any weights-only ``torch.load`` reads the
    checkpoint without an allow-list (mmseg's ``init_model``, the inferencers, with no change to mmengine's loaders),
    and turn it back when a run loads it. Declared in ``configs/_base_``'s ``default_hooks`` (``plain_checkpoint``).
    """

    priority = 'LOW'

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        plain_message_hub(checkpoint)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        restore_message_hub(checkpoint)


@HOOKS.register_module()
class CheckpointDigestHook(Hook):
    """Write the digest of every tensor of each saved checkpoint into its meta (``meta['tensor_digest']``), which
    every load through :mod:`jetvit_mm` checks (:mod:`jetvit_mm.models.checkpoint.integrity`): a file damaged after
    it was written is refused, naming it. Runs last, after any hook that changes what is saved (an EMA's weights).
    Declared in ``configs/_base_``'s ``default_hooks`` (``checkpoint_digest``)."""

    priority = 'LOWEST'

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        with_digest(checkpoint)
