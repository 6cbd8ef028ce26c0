"""FSDP2 (``torch.distributed.fsdp.fully_shard``) as an mmengine model wrapper and runner (docs/scale_out.md).

mmengine's own ``FSDPStrategy`` / ``MMFullyShardedDataParallel`` wrap FSDP1, which PyTorch deprecated and which
refuses a CPU.
"""
from typing import Dict, List, Optional, Union

import torch
import torch.distributed as dist
from mmengine.logging import print_log
from mmengine.registry import MODEL_WRAPPERS, RUNNERS
from torch import nn

from jetvit_mm.distill.fsdp2 import is_meta, materialize_shards, shard_model
from jetvit_mm.dtypes import LONG, to_dtype
from jetvit_mm.models.supernet import JetViTSupernet

from ..checkpoint.fsdp import STATE_DICT_TYPES, FSDP2CheckpointHook, gather_checkpoint_state
from .runner import JetViTRunner


def _dtype(name: Optional[str], what: str) -> Optional[torch.dtype]:
    """``None`` keeps the parameters' own dtype."""
    return None if name is None else to_dtype(name, f'FSDP2Wrapper {what}', valid=(*LONG, 'None'))


@MODEL_WRAPPERS.register_module()
class FSDP2Wrapper(nn.Module):
    """Shard ``module`` with FSDP2: one unit per transformer block of every JetViT, the rest in the root unit.

    Args:
        param_dtype / reduce_dtype: dtype of the gathered parameters (None: their own) / of the gradient reduction.
        cpu_offload: sharded parameters, gradients and optimizer states in CPU memory (the step runs there).
        reshard_after_forward: free each block's gathered parameters after its forward (ZeRO-3, not ZeRO-2).
        check_path: check before every step that all ranks hold the same supernet path (else collectives hang).
        checkpoint: ``'full'`` (gathered on rank 0) or ``'sharded'`` (``torch.distributed.checkpoint``).
        meta_init: build on the meta device and load each rank's shard only (:class:`FSDP2Runner`; a model given
            on the meta device is loaded so anyway). Parameters no checkpoint holds are initialised by their
            module's ``reset_parameters`` with a seed from their name.
        device_ids: accepted for the DDP-style call of ``tools/train.py``'s CPU set-up; unused.
    """

    def __init__(self, module: nn.Module, param_dtype: Optional[str] = 'bfloat16',
                 reduce_dtype: Optional[str] = 'float32', cpu_offload: bool = False,
                 reshard_after_forward: bool = True, check_path: bool = True, checkpoint: str = 'full',
                 meta_init: bool = False, device_ids=None) -> None:
        super().__init__()
        if checkpoint not in STATE_DICT_TYPES:
            raise ValueError(f'FSDP2Wrapper: unknown checkpoint {checkpoint!r}; valid: {", ".join(STATE_DICT_TYPES)}')
        self.checkpoint = checkpoint
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError('FSDP2Wrapper needs a process group: launch with torchrun and --launcher pytorch')
        self.module = module
        self.check_path = check_path
        options = dict(param_dtype=_dtype(param_dtype, 'param_dtype'),
                       reduce_dtype=_dtype(reduce_dtype, 'reduce_dtype'), cpu_offload=cpu_offload,
                       reshard_after_forward=reshard_after_forward)
        self.initialised: List[str] = []
        if is_meta(module):
            if not hasattr(module, 'meta_state'):
                raise ValueError(f'FSDP2Wrapper: a {type(module).__name__} on the meta device has no meta_state() '
                                 'to load its shards from (build a FeatureDistiller with build_on_meta)')
            state, init = module.meta_state()
            self.num_units = shard_model(module, sync=False, **options)
            self.initialised = materialize_shards(module, state, init)
            print_log(f'FSDP2Wrapper: built on the meta device, loaded this rank\'s shards ({len(state)} parameters '
                      f'from checkpoints, {len(self.initialised)} initialised by their modules)', logger='current')
            return
        if hasattr(module, 'init_weights'):  # what the runner would do after wrapping, here on full tensors
            module.init_weights()
        self.num_units = shard_model(module, **options)

    def _check_same_path(self) -> None:
        supernets = [m for m in self.module.modules() if isinstance(m, JetViTSupernet)]
        if not supernets:
            return
        paths: List[Optional[str]] = [None] * dist.get_world_size()
        dist.all_gather_object(paths, [s.arch for s in supernets])
        if any(p != paths[0] for p in paths):
            raise RuntimeError(f'the ranks train different supernet paths ({paths}); every rank must sample the same '
                               'path (SupernetSamplerHook sends rank 0\'s seed to all)')

    def train_step(self, data, optim_wrapper):
        if self.check_path:
            self._check_same_path()
        return self.module.train_step(data, optim_wrapper)

    def val_step(self, data):
        return self.module.val_step(data)

    def test_step(self, data):
        return self.module.test_step(data)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


@RUNNERS.register_module()
class FSDP2Runner(JetViTRunner):
    """The runner for an :class:`FSDP2Wrapper` model: the wrapper initialises and syncs the weights before sharding
    (the plain runner would broadcast every sharded tensor after); registers
    :class:`~jetvit_mm.mm.checkpoint.fsdp.FSDP2CheckpointHook`."""

    shards_with_fsdp2 = True

    def register_hooks(self, default_hooks=None, custom_hooks=None) -> None:
        super().register_hooks(default_hooks, custom_hooks)
        if isinstance(self.model, FSDP2Wrapper) and not any(isinstance(h, FSDP2CheckpointHook) for h in self.hooks):
            self.register_hook(FSDP2CheckpointHook())

    def build_model(self, model: Union[nn.Module, Dict]) -> nn.Module:
        """With ``model_wrapper_cfg.meta_init``: the distiller on the meta device, no checkpoint read yet."""
        wrapper = self.cfg.get('model_wrapper_cfg') or {}
        if isinstance(model, dict) and self.distributed and wrapper.get('type') == 'FSDP2Wrapper' \
                and wrapper.get('meta_init') and str(model.get('type')).split('.')[-1] == 'FeatureDistiller':
            # (one process: no wrapper, the model is built in full)
            from ..models.distiller import build_on_meta
            return build_on_meta(model)
        return super().build_model(model)

    def wrap_model(self, model_wrapper_cfg: Optional[Dict], model: nn.Module) -> nn.Module:
        """A meta-device model goes to its wrapper as it is (mmengine would first move it to the device, which a
        meta tensor cannot)."""
        if model_wrapper_cfg is None or not is_meta(model):
            return super().wrap_model(model_wrapper_cfg, model)
        return MODEL_WRAPPERS.build(model_wrapper_cfg, default_args=dict(module=model))

    def _init_model_weights(self) -> None:
        if not isinstance(self.model, FSDP2Wrapper):
            super()._init_model_weights()

    def save_checkpoint(self, out_dir: str, filename: str, file_client_args=None, save_optimizer: bool = True,
                        save_param_scheduler: bool = True, meta=None, by_epoch: bool = True, backend_args=None):
        """Gather (or write the shards of) the sharded state on every rank, then let rank 0 write the runner's file
        (mmengine's ``save_checkpoint`` is master-only)."""
        if isinstance(self.model, FSDP2Wrapper):
            self.fsdp2_pending = gather_checkpoint_state(self.model, self.optim_wrapper, out_dir, filename,
                                                         save_optimizer)
        try:
            super().save_checkpoint(out_dir, filename, file_client_args=file_client_args,
                                    save_optimizer=save_optimizer, save_param_scheduler=save_param_scheduler,
                                    meta=meta, by_epoch=by_epoch, backend_args=backend_args)
        finally:
            self.fsdp2_pending = None
        if isinstance(self.model, FSDP2Wrapper):
            dist.barrier()  # the file exists on every rank's return
