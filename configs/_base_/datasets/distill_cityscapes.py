# Cityscapes train images for supernet distillation (labels unused): 512x1024 crops (32x64 patches, so that
# 16x16-patch windows differ from global attention) of images rescaled 0.5-2.0, batch 8 GPUs x 4. A distillation
# makes no predictions: no validation or test loop.
_base_ = ['mmseg::_base_/datasets/cityscapes.py']

crop_size = (512, 1024)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResize', scale=(2048, 1024), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=4, num_workers=4, dataset=dict(pipeline=train_pipeline))
val_dataloader = val_cfg = val_evaluator = None
test_dataloader = test_cfg = test_evaluator = None
