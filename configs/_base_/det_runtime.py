# What the JetViT detection configs share: mmdet's runtime (the inputs' ImageNet normalisation is the mmdet model
# base's), the import that registers this plugin's types, and the ViTDet recipe's logging and checkpoints: by
# iteration, every 5000 (the schedule's validation interval), the last one kept.
_base_ = ['mmdet::_base_/default_runtime.py']
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)
# The runner and the checkpoint hooks every run of this project has, whichever tool starts it (tools/train.py, or
# mmseg's / mmdet's own tools/train.py and tools/test.py): the runner checks the data, trains distributed on CPUs and
# loads checkpoints safely (jetvit_mm/mm/runner.py); each checkpoint carries the JetViTs' arch specs in its meta, its
# runner state as plain data and the digest of its tensors (jetvit_mm/mm/hooks.py). In default_hooks (a dict) so that
# a config's own default_hooks or custom_hooks keep them; an FSDP2 config sets runner_type = 'FSDP2Runner'.
runner_type = 'JetViTRunner'

default_hooks = dict(
    arch_spec=dict(type='ArchSpecHook'),
    plain_checkpoint=dict(type='PlainCheckpointHook'),
    checkpoint_digest=dict(type='CheckpointDigestHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, save_last=True, interval=5000, max_keep_ckpts=5))
log_processor = dict(type='LogProcessor', window_size=50, by_epoch=False)
