# JetViT Step 1 for DINOv3-B on ADE20K training images (labels unused), 512x512 crops as the probe.
#   --cfg-options model.teacher.checkpoint=/path/to/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth
_base_ = [
    '../_base_/datasets/distill_ade20k.py',
    '../_base_/default_runtime.py',
    '../_base_/models/distill_dinov3_base.py',
    '../_base_/schedules/distill_20k.py',
]

model = dict(
    data_preprocessor=dict(_base_.data_preprocessor, size=_base_.crop_size))
