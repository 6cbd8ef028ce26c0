# The JetViT paper's linear-probe schedule: 5,000 iterations of Adam at a constant lr 1e-4 (no weight
# decay, no clipping), trained with cross-entropy (the LinearProbeHead's loss in the model bases).
#
# Batch: the paper trains with batch 1024. The experiment configs use 8 GPUs x 2 images = 16; to get
# closer to the paper's batch, accumulate gradients and scale the iterations with them, e.g. 64 x 16:
#   --cfg-options optim_wrapper.accumulative_counts=64 train_cfg.max_iters=320000
#                 train_cfg.val_interval=64000 default_hooks.checkpoint.interval=64000
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='Adam', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.0),
    clip_grad=None)
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]  # the paper names no decay
train_cfg = dict(type='IterBasedTrainLoop', max_iters=5000, val_interval=1000)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=1000, max_keep_ckpts=2),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook'))
