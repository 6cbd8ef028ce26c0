# Pseudo-label fine-tuning of a tiny hybrid (fixed arch) on a frozen teacher's disparities (scale-and-shift-
# invariant loss + gradient matching), on generated NYU-layout images (labels unused), then the affine-invariant
# evaluation: the tests use it. Structure of configs/depth/depthanything_large_pseudolabel_finetune.py.
#   --cfg-options model.teacher.checkpoint=TEACHER.pth model.backbone.checkpoint=HYBRID.pth \
#                 model.decode_head.checkpoint=TEACHER.pth
_base_ = ['./depth_eval_tiny_nyu.py']

crop_size = (56, 70)
model = dict(
    type='PseudoLabelDepthEstimator',
    data_preprocessor=dict(size=crop_size),
    teacher=dict(type='JetViTDepthAnything', checkpoint=None, features=16, out_channels=[8, 16, 32, 32],
                 **_base_.backbone),
    backbone=dict(arch='LWFF', frozen=False),
    decode_head=dict(loss_decode=dict(type='ScaleShiftInvariantLoss', gradient_weight=2.0, ignore_top=0.1)))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResize', scale=(84, 63), ratio_range=(0.9, 1.2), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='BaseSegDataset', data_root=_base_.data_root, data_prefix=dict(img_path='images/train'),
                 img_suffix='.jpg', pipeline=train_pipeline))  # any folder of images: labels are not read
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.01))
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=3, val_interval=3)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=1, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=3))
randomness = dict(seed=0)
log_processor = dict(by_epoch=False)
# refinenet4.resConfUnit1 exists in every DepthAnythingV2 checkpoint but is never used in forward
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=True)
