# A tiny mmseg linear probe of a JetViT (DINOv3 architecture, random weights) on generated ADE20K-layout data
# (ADEChallengeData2016): the ADE20K sibling of seg_linear_probe_tiny_cityscapes.py. Labels as mmseg's ade20k
# base and configs/probe/*_ade20k.py: 150 classes, LoadAnnotations(reduce_zero_label=True) maps 0 ("other")
# to 255 (ignored) and k to k - 1. Evaluated with sliding windows like the real probe, scaled down: 32x32
# windows with stride 21 (2/3 of the window, as 512/341) on 64x64 images. Runs in seconds on a CPU.
_base_ = [
    'mmseg::_base_/datasets/ade20k.py',
    '../../configs/_base_/default_runtime.py',
]

data_root = 'data/tiny_ade/ADEChallengeData2016'
crop_size = (64, 64)
num_classes = 150
embed_dim = 32

data_preprocessor = dict(
    _base_.data_preprocessor,
    pad_val=0,
    seg_pad_val=255,
    size=crop_size,
    test_cfg=dict(size_divisor=16))
model = dict(
    type='EncoderDecoder',
    data_preprocessor=data_preprocessor,
    backbone=dict(
        type='JetViT',
        model_name='dinov3_vits16',
        arch='LWLF',
        embed_dim=embed_dim,
        depth=4,
        num_heads=2,
        mixers=dict(L=dict(type='LinearAttention', conv='squeeze'), W=dict(type='WindowAttention', window_size=4),
                    F=dict(type='FullAttention')),
        checkpoint=None,
        frozen=True),
    decode_head=dict(type='LinearProbeHead', in_channels=embed_dim, num_classes=num_classes, ignore_index=255),
    train_cfg=dict(),
    test_cfg=dict(mode='slide', crop_size=(32, 32), stride=(21, 21)))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(256, 64), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(256, 64), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator

optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3, weight_decay=1e-3))
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=4, val_interval=4)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=1, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2, max_keep_ckpts=3))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
