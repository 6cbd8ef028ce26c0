# Step-1 supernet distillation of a tiny JetViT (DINOv3 architecture) on generated Cityscapes-layout
# images (no labels used): the tests use it; it runs in seconds on a CPU.
_base_ = [
    'mmseg::_base_/datasets/cityscapes.py',
    '../../configs/_base_/default_runtime.py',
]

data_root = 'data/tiny_cityscapes'
crop_size = (64, 128)
backbone = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2,
                mixers=dict(L=dict(type='LinearAttention', conv='squeeze'),
                            W=dict(type='WindowAttention', window_size=4), F=dict(type='FullAttention')))
model = dict(
    type='FeatureDistiller',
    data_preprocessor=dict(_base_.data_preprocessor, size=crop_size),
    teacher=dict(type='JetViT', checkpoint=None, **backbone),
    student=dict(type='JetViTSupernet', search_space='LW', **backbone),
    distill_indices=(-1, ),
    loss='mse')

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResize', scale=(128, 64), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = None
val_evaluator = None
val_cfg = None
test_dataloader = None
test_evaluator = None
test_cfg = None

optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=2e-3, weight_decay=0.0))
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=6)
custom_hooks = [dict(type='SupernetSamplerHook', mode='uniform')]
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=1, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=3))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
# DDP: only the sampled candidates take part in an iteration
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=True)
