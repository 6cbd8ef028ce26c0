# JetViT Step 1 for DINOv3-B on ADE20K training images (labels unused), 512x512 crops as the probe.
#   --cfg-options model.teacher.checkpoint=/path/to/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth
_base_ = [
    'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py',
    '../_base_/models/distill_dinov3_base.py',
    '../_base_/schedules/distill_20k.py',
]
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)

crop_size = (512, 512)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    # short side 512 x 1.0-2.0 (the probe's 0.5-2.0 without the zoomed-out half): every 512x512 crop is all image,
    # so no padding tokens are distilled (ADE20K evaluation sees at most a 15-pixel pad per window)
    dict(type='RandomResize', scale=(2048, 512), ratio_range=(1.0, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=4, num_workers=4, dataset=dict(pipeline=train_pipeline))
model = dict(data_preprocessor=dict(size=crop_size))
# distillation needs no labels and makes no predictions: no validation or test loop
val_dataloader = val_cfg = val_evaluator = None
test_dataloader = test_cfg = test_evaluator = None
