"""The adapter's side of checkpoints, beyond the weights the core reads and applies
(:func:`~jetvit_mm.models.checkpoint.read`, :func:`~jetvit_mm.models.checkpoint.apply_checkpoint`): ``safe_globals``
(the data types of an mmengine runner checkpoint, allowed by ``import jetvit_mm.mm``), ``message_hub`` (the plain
runner state this project's checkpoints hold), ``hooks`` (the hook that saves each checkpoint so),
``saved_config`` (the config a checkpoint carries, read literal-only, never run), ``fsdp`` (sharded FSDP2
checkpoints)."""
from .hooks import ArchSpecHook, CheckpointDigestHook
from .message_hub import plain_message_hub, restore_message_hub
from .safe_globals import allow_runner_checkpoint_types, runner_safe_globals
from .saved_config import config_of_checkpoint, export_config_text, saved_model_config, without_backbone_checkpoint

__all__ = ['ArchSpecHook', 'CheckpointDigestHook', 'allow_runner_checkpoint_types', 'config_of_checkpoint',
           'export_config_text', 'plain_message_hub', 'restore_message_hub', 'runner_safe_globals',
           'saved_model_config', 'without_backbone_checkpoint']
