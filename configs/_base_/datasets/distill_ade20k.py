# ADE20K training images for supernet distillation (labels unused), 512x512 crops as the probe's, batch 8 GPUs x 4.
# Short side 512 x 1.0-2.0 (the probe's 0.5-2.0 without the zoomed-out half): every crop is all image, so no padding
# tokens are distilled (ADE20K evaluation sees at most a 15-pixel pad per window). No validation or test loop.
_base_ = ['mmseg::_base_/datasets/ade20k.py']

crop_size = (512, 512)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResize', scale=(2048, 512), ratio_range=(1.0, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=4, num_workers=4, dataset=dict(pipeline=train_pipeline))
val_dataloader = val_cfg = val_evaluator = None
test_dataloader = test_cfg = test_evaluator = None
