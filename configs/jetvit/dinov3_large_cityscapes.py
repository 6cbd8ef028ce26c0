# JetViT Step 1 for DINOv3-L on Cityscapes (see dinov3_base_cityscapes.py).
_base_ = [
    'mmseg::_base_/datasets/cityscapes.py',
    'mmseg::_base_/default_runtime.py',
    '../_base_/models/distill_dinov3_large.py',
    '../_base_/schedules/distill_20k.py',
]
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)

crop_size = (512, 1024)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResize', scale=(2048, 1024), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, num_workers=4, dataset=dict(pipeline=train_pipeline))
model = dict(data_preprocessor=dict(size=crop_size))
# distillation needs no labels and makes no predictions: no validation or test loop
val_dataloader = val_cfg = val_evaluator = None
test_dataloader = test_cfg = test_evaluator = None
