# Step-1 supernet distillation with two letters from the plugin (jetvit_pooled): P and C next to the default L, W, F,
# at toy size (seconds on a CPU). Run from the repository root with the plugin importable:
#   PYTHONPATH=examples/pooled_attention python tools/train.py examples/pooled_attention/configs/distill_pooled_tiny.py
_base_ = ['_base_/pooled_tiny.py']

model = dict(
    type='FeatureDistiller',
    data_preprocessor=dict(_base_.data_preprocessor, size=_base_.crop_size),
    teacher=dict(type='JetViT', checkpoint=None, **_base_.backbone),
    student=dict(type='JetViTSupernet', search_space=None, **_base_.backbone),  # None: every letter but F per layer
    distill_indices=(-1, ),
    loss='mse')
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResize', scale=(128, 64), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=_base_.crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=_base_.data_root, pipeline=train_pipeline))
val_dataloader = None
val_evaluator = None
val_cfg = None
test_dataloader = None
test_evaluator = None
test_cfg = None
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=2e-3, weight_decay=0.0))
train_cfg = dict(type='IterBasedTrainLoop', max_iters=6)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=1, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=3))
custom_hooks = [dict(type='SupernetSamplerHook', mode='uniform')]
# DDP: only the sampled candidates take part in an iteration
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=True)
