# JetViT Step 1 for DepthAnythingV2-L: supernet distillation of its DINOv2-L backbone on the four tapped layers the
# DPT head reads (4, 11, 17, 23, after the final norm), MSE, images only (no depth labels).
#   tools/train.py configs/jetvit/depthanything_large_distill.py \
#       --cfg-options model.teacher.checkpoint=/path/depth_anything_v2_vitl.pth
# The student starts from every teacher weight. Then search with depthanything_large_search_da2k.py; Step 2
# ({Step-1 winner, F} per layer, budgeted sampling) is depthanything_large_distill_step2.py.
#
# Images: any folder of unlabeled images (data/depth_unlabeled/images/**/*.jpg), short side resized to 518-777 and
# cropped to 518x518 (37x37 patches, DepthAnythingV2's training resolution). 8 GPUs x 4 images; schedule
# ../_base_/schedules/distill_20k.py (ours: the paper gives none).
_base_ = [
    'mmseg::_base_/default_runtime.py',
    '../_base_/schedules/distill_20k.py',
]
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)

crop_size = (518, 518)
backbone = dict(model_name='dinov2_vitl14', window_size=16, linear_cfg=dict(conv='squeeze', kernel_size=3))
model = dict(
    type='FeatureDistiller',
    data_preprocessor=dict(
        type='SegDataPreProcessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        size=crop_size),
    teacher=dict(type='JetViT', checkpoint=None, **backbone),
    student=dict(type='JetViTSupernet', search_space='LW', freeze_mlp=False, **backbone),
    distill_indices=(4, 11, 17, 23),  # DepthAnythingV2-L's tapped layers
    loss='mse')

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResize', scale=(4096, 518), ratio_range=(1.0, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=4, num_workers=4, persistent_workers=True, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='BaseSegDataset', data_root='data/depth_unlabeled', data_prefix=dict(img_path='images'),
                 img_suffix='.jpg', pipeline=train_pipeline))  # labels are not read
# distillation makes no predictions: no validation or test loop
val_dataloader = val_cfg = val_evaluator = None
test_dataloader = test_cfg = test_evaluator = None
