"""The runner every JetViT config names (``runner_type = 'JetViTRunner'`` in ``configs/_base_/default_runtime.py``
and ``det_runtime.py``), so that this project's ``tools/train.py`` / ``tools/test.py`` and mmseg's and mmdet's own
tools build the same one from the config alone.

It is mmengine's :class:`~mmengine.runner.Runner` with:

- the datasets, dataloaders and evaluators built with bad input named
  (:class:`~jetvit_mm.mm.datasets.data_checks.CheckedDataMixin`);
- distributed training without a GPU (``--launcher pytorch`` / ``slurm`` on CPU: a gloo process group, DDP without
  device ids), where mmengine's ``init_dist`` assumes CUDA;
- ``load_from`` and resumed checkpoints read once by the core's :func:`~jetvit_mm.models.checkpoint.read`
  (weights-only with the runner's data types allowed, checked, their config text never run), not by mmengine's
  loader, and applied by its :func:`~jetvit_mm.models.checkpoint.apply_checkpoint`.

:class:`~jetvit_mm.mm.engine.fsdp.FSDP2Runner` (``runner_type = 'FSDP2Runner'``, for an ``FSDP2Wrapper`` model)
builds on it.
"""
import os
import re
import urllib.parse
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, Optional

import torch
from mmengine.model import is_model_wrapper
from mmengine.registry import MODEL_WRAPPERS, RUNNERS
from mmengine.runner import Runner
from torch.nn.parallel import DistributedDataParallel

from jetvit_mm.models.checkpoint import Checkpoint, apply_checkpoint, read

from ..checkpoint import allow_runner_checkpoint_types
from ..datasets.data_checks import CheckedDataMixin

__all__ = ['JetViTRunner', 'init_cpu_process_group', 'launch_problem']

# the variables each launcher sets for every process it starts (mmengine's init_dist and torch's env:// read them),
# and how to start a tool with it; slurm needs SLURM_NODELIST on a GPU (mmengine finds the master there)
LAUNCHES = dict(pytorch=(('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT'),
                         'torchrun (torchrun --nproc_per_node N TOOL ARGS --launcher pytorch)'),
                slurm=(('SLURM_PROCID', 'SLURM_NTASKS'), 'srun in a SLURM job (srun python TOOL ARGS --launcher '
                       'slurm; without a GPU, export MASTER_ADDR and MASTER_PORT in the job first)'))


def launch_problem(launcher: str) -> Optional[str]:
    """Why this process cannot join a ``--launcher`` job (a variable its launcher sets is missing or, for a number,
    not an integer: the tool was not started by torchrun or srun), or None."""
    if launcher not in LAUNCHES:
        return None
    needed, how = LAUNCHES[launcher]
    if launcher == 'slurm':
        needed += ('SLURM_NODELIST', ) if torch.cuda.is_available() else ('MASTER_ADDR', 'MASTER_PORT')
    missing = [name for name in needed if not os.environ.get(name)]
    bad = [f'{name}={os.environ[name]!r}' for name in needed if name not in missing
           and not name.endswith(('ADDR', 'NODELIST')) and not os.environ[name].strip().isdigit()]
    if not (missing or bad):
        return None
    what = f'{", ".join(missing)} not set in the environment' if missing else f'{", ".join(bad)}: not an integer'
    return f'--launcher {launcher}: {what}; start the tool with {how}, or drop --launcher {launcher} (one process)'


def init_cpu_process_group(launcher: str) -> None:
    """Start a gloo process group when there is no GPU (mmengine's init_dist assumes CUDA).

    mmengine skips its own initialisation when a group already exists.
    """
    if torch.distributed.is_initialized():
        return
    problem = launch_problem(launcher)
    if problem:
        raise ValueError(problem)
    if launcher == 'slurm':
        os.environ.setdefault('RANK', os.environ['SLURM_PROCID'])
        os.environ.setdefault('WORLD_SIZE', os.environ['SLURM_NTASKS'])
        os.environ.setdefault('LOCAL_RANK', os.environ.get('SLURM_LOCALID', '0'))
    torch.distributed.init_process_group(backend='gloo', init_method='env://')


# the checkpoint hook a JetViTRunner adds to mmengine's default hooks (jetvit_mm/mm/checkpoint), under this name
JETVIT_DEFAULT_HOOKS = dict(checkpoint_digest=dict(type='CheckpointDigestHook'))


def local_copy(filename: str) -> str:
    """``filename`` itself, or for a URL (``http``, ``https``, ``file``) its copy in torch's hub cache
    (``<hub dir>/checkpoints/<file name>``, as mmengine's and torch's loaders keep it), downloaded when missing."""
    if '://' not in filename:
        return filename
    scheme = filename.split('://', 1)[0]
    if scheme not in ('http', 'https', 'file'):
        raise ValueError(f'{filename}: a checkpoint is a local path or an http://, https:// or file:// URL, '
                         f'not {scheme}://; download it and give its path')
    local = Path(torch.hub.get_dir()) / 'checkpoints' / Path(urllib.parse.urlparse(filename).path).name
    if not local.is_file():
        local.parent.mkdir(parents=True, exist_ok=True)
        torch.hub.download_url_to_file(filename, str(local), progress=False)  # written aside, then moved
    return str(local)


@RUNNERS.register_module()
class JetViTRunner(CheckedDataMixin, Runner):
    """mmengine's runner with checked data, CPU-only distributed training and this project's safe checkpoint loading
    (see the module's documentation); what ``configs/_base_`` names as ``runner_type``."""

    shards_with_fsdp2 = False  # FSDP2Runner: the runner an FSDP2Wrapper needs
    given_checkpoint: Optional[Checkpoint] = None  # the file of load_from / resume, read already by the tool
    fit_config: Optional[str] = None  # tools/test.py: the checkpoint must fit the model of this config

    def register_default_hooks(self, hooks: Optional[Dict[str, Any]] = None) -> None:
        """mmengine's default hooks plus this project's (:data:`JETVIT_DEFAULT_HOOKS`: the runner state as plain data,
        the tensors' digest), merged with the config's ``default_hooks`` as mmengine merges its own: a config's entry
        replaces one, ``None`` removes it (``plain_checkpoint=None`` of a config written for the former second hook:
        nothing to remove)."""
        hooks = {**JETVIT_DEFAULT_HOOKS, **(hooks or {})}
        if 'plain_checkpoint' in hooks and hooks['plain_checkpoint'] is None:
            del hooks['plain_checkpoint']
        super().register_default_hooks(hooks)

    def setup_env(self, env_cfg: Dict) -> None:
        if self.distributed and not torch.cuda.is_available():
            init_cpu_process_group(self.launcher)
        super().setup_env(env_cfg)

    def wrap_model(self, model_wrapper_cfg: Optional[Dict], model: torch.nn.Module) -> Any:
        wrapper = dict(model_wrapper_cfg or {})
        if str(wrapper.get('type', '')).split('.')[-1] == 'FSDP2Wrapper':
            if not self.shards_with_fsdp2:
                raise ValueError(f"model_wrapper_cfg.type='FSDP2Wrapper' needs runner_type='FSDP2Runner' in the "
                                 f"config (got {type(self).__name__}): its weights are initialised and synced "
                                 f"before sharding, and its checkpoints gathered on every rank")
        if self.distributed and not torch.cuda.is_available():
            wrapper.setdefault('type', 'MMDistributedDataParallel')
            if issubclass(MODEL_WRAPPERS.get(wrapper['type']), DistributedDataParallel):
                wrapper['device_ids'] = None  # CPU: DDP must not be given device ids
                if model_wrapper_cfg is None:  # as mmengine's default DDP
                    wrapper.update(broadcast_buffers=False,
                                   find_unused_parameters=self.cfg.get('find_unused_parameters', False))
            model_wrapper_cfg = wrapper
        return super().wrap_model(model_wrapper_cfg, model)

    def load_checkpoint(self, filename: str, map_location: Any = 'cpu', strict: bool = False,
                        revise_keys: list = [(r'^module.', '')]) -> Dict:  # noqa: B006 (mmengine's signature)
        """mmengine's ``load_checkpoint`` (also what ``resume`` reads through): the file read once by the core's
        :func:`~jetvit_mm.models.checkpoint.read` (or as the tool read it: ``given_checkpoint``; an http(s) URL, a
        model zoo's ``load_from``, from its copy in torch's hub cache, downloaded once as mmengine's loader does),
        applied by :func:`~jetvit_mm.models.checkpoint.apply_checkpoint`. What does not fit is a warning, as in
        mmengine's non-strict load (with ``fit_config``: missing and mis-shaped keys are an error). Tensors load to
        the CPU (the model and optimizer place them)."""
        given, self.given_checkpoint = self.given_checkpoint, None  # taken: a later load reads the file
        local = Path(local_copy(str(filename)))
        allow_runner_checkpoint_types()
        checkpoint = given if given is not None and given.path.resolve() == local.resolve() else read(local)
        self.call_hook('after_load_checkpoint', checkpoint=checkpoint.raw)
        model = self.model.module if is_model_wrapper(self.model) else self.model
        state = checkpoint.raw.get('state_dict', checkpoint.raw)
        metadata = getattr(state, '_metadata', None)
        for pattern, replacement in revise_keys:
            state = OrderedDict((re.sub(pattern, replacement, k), v) for k, v in state.items())
        if metadata is not None:
            state._metadata = metadata
        source = str(checkpoint.path)
        target = f'the model of {self.fit_config}' if self.fit_config else type(model).__name__
        report = apply_checkpoint(model, state, strict=strict or self.fit_config is not None,
                                  allow_unexpected=not strict, source=source, target=target)
        if report.describe(source, target):
            self.logger.warning(report.describe(source, target))
        self._has_loaded = True
        self.logger.info(f'Load checkpoint from {source}')
        return checkpoint.raw
