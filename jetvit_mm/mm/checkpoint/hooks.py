"""The hooks every run's checkpoints go through (``configs/_base_`` declares them; ``JetViTRunner`` adds the first)."""
from mmengine.hooks import Hook

from jetvit_mm.models.checkpoint.integrity import with_digest

from ..registry import HOOKS
from .message_hub import plain_message_hub, restore_message_hub


@HOOKS.register_module()
@HOOKS.register_module(name='PlainCheckpointHook')  # its former half, which old configs and checkpoints name
class CheckpointDigestHook(Hook):
    """Save each checkpoint so that any weights-only load reads it and a damaged copy is refused: its runner state
    as plain data (:func:`plain_message_hub`, turned back by :func:`restore_message_hub` when a run loads it), then
    the digest of its tensors in its meta (``meta['tensor_digest']``, which every load through :mod:`jetvit_mm`
    checks). Runs last, after any hook that changes what is saved (an EMA's weights). ``JetViTRunner`` adds it to
    the default hooks (``checkpoint_digest``); declaring it twice does no harm (both steps are idempotent)."""

    priority = 'LOWEST'

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        plain_message_hub(checkpoint)
        with_digest(checkpoint)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        restore_message_hub(checkpoint)


@HOOKS.register_module()
class ArchSpecHook(Hook):
    """Does nothing: the arch spec travels inside the state dict, which is what loading checks. Kept registered so
    that configs which declare it (``default_hooks.arch_spec`` of the bases before 2026-12-05, copied into user configs
    and into the config text of checkpoints written then) still build."""
