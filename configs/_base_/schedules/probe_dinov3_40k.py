# DINOv3's linear-probe schedule (dinov3/eval/segmentation, config-ade20k-linear-training.yaml): 40,000
# iterations of AdamW, lr 1e-3, weight decay 1e-3, betas (0.9, 0.999), no gradient clipping (gradient_clip 'inf'),
# batch 16 (8 GPUs x 2).
#
# Learning rate: DINOv3's WarmupOneCycleLR with a 1,500-iteration linear warmup from 1e-6 x lr followed by a
# *cosine* decay to 0 (final_div_factor .inf); not poly. Beta1 stays 0.9 (use_beta1 / update_momentum False).
# Here: LinearLR for the warmup, then CosineAnnealingLR from lr to 0. One small difference from the official
# scheduler: its cosine phase is measured from iteration 0 (so it starts at 0.9965 x lr after warmup, here at lr).
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), weight_decay=1e-3))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, end_factor=1.0, by_epoch=False, begin=0, end=1500),
    dict(type='CosineAnnealingLR', eta_min=0., by_epoch=False, begin=1500, end=40000),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=40000, val_interval=4000)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=4000, max_keep_ckpts=2),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook'))
