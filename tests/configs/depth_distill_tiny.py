# Step-1 supernet distillation of a tiny DINOv2-architecture JetViT on the four tapped layers (the maps the DPT
# head reads), on generated NYU-layout images (labels unused): the tests use it; seconds on a CPU. Structure of
# configs/depth/depthanything_large_distill.py.
_base_ = ['../../configs/_base_/default_runtime.py']  # mmseg's runtime, the plugin import, the ImageNet normalisation

data_root = 'data/tiny_nyu'
crop_size = (56, 70)
backbone = dict(model_name='dinov2_vits14', embed_dim=32, depth=4, num_heads=2, out_indices=(0, 1, 2, 3),
                mixers=dict(L=dict(type='LinearAttention', conv='squeeze'),
                            W=dict(type='WindowAttention', window_size=2), F=dict(type='FullAttention')))
model = dict(
    type='FeatureDistiller',
    data_preprocessor=dict(_base_.data_preprocessor, size=crop_size),
    teacher=dict(type='JetViT', checkpoint=None, **backbone),
    student=dict(type='JetViTSupernet', search_space='LW', **backbone),
    distill_indices=(0, 1, 2, 3),  # DepthAnythingV2's tapped layers of this 4-layer model
    loss='mse')

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResize', scale=(84, 63), ratio_range=(0.9, 1.2), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='BaseSegDataset', data_root=data_root, data_prefix=dict(img_path='images/train'),
                 img_suffix='.jpg', pipeline=train_pipeline))  # any folder of images: labels are not read
val_dataloader = val_cfg = val_evaluator = None
test_dataloader = test_cfg = test_evaluator = None

optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=2e-3, weight_decay=0.0))
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=4)
custom_hooks = [dict(type='SupernetSamplerHook', mode='uniform')]
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=1, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=4))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=True)
