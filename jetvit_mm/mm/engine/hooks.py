"""The supernet's training hook: one random single path per iteration (the checkpoint hooks are in
:mod:`jetvit_mm.mm.checkpoint`)."""
import json
import os.path as osp
from typing import Optional

from mmengine.dist import broadcast_object_list, is_distributed
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from jetvit_mm.models.supernet import JetViTSupernet
from jetvit_mm.search import SupernetSampler

from ..registry import HOOKS


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
        mode, min_full, max_full: as :class:`~jetvit_mm.search.SupernetSampler`'s; ``seed`` overrides the runner's.
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
