# A tiny mmseg linear probe whose JetViT declares the plugin's P and C letters: the search's and tools/test.py's
# config for the supernet of distill_pooled_tiny.py (its mixers are the distillation's: both take _base_'s).
_base_ = ['_base_/pooled_tiny.py']

num_classes = 19
model = dict(
    type='EncoderDecoder',
    data_preprocessor=dict(_base_.data_preprocessor, pad_val=0, seg_pad_val=255, size=_base_.crop_size),
    backbone=dict(type='JetViT', arch='LPCF', checkpoint=None, frozen=True, **_base_.backbone),
    decode_head=dict(type='LinearProbeHead', in_channels=_base_.embed_dim, num_classes=num_classes),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=(128, 64), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=_base_.crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(128, 64), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=_base_.data_root, pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=_base_.data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3, weight_decay=1e-3))
train_cfg = dict(type='IterBasedTrainLoop', max_iters=4, val_interval=4)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=1, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2, max_keep_ckpts=3))
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
