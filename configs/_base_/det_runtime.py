# What the JetViT detection configs share: mmdet's runtime (the inputs' ImageNet normalisation is the mmdet model
# base's), the import that registers this plugin's types, and the ViTDet recipe's logging and checkpoints: by
# iteration, every 5000 (the schedule's validation interval), the last one kept.
_base_ = ['mmdet::_base_/default_runtime.py']
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)
# The runner every run of this project has (configs/_base_/default_runtime.py says what it adds: data checks, CPU
# distributed training, safe loading, the checkpoint hooks among mmengine's default hooks).
runner_type = 'JetViTRunner'

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, save_last=True, interval=5000, max_keep_ckpts=5))
log_processor = dict(type='LogProcessor', window_size=50, by_epoch=False)
