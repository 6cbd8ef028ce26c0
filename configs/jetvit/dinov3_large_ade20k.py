# JetViT Step 1 for DINOv3-L on ADE20K: dinov3_base_ade20k.py with the ViT-L teacher and student.
#   --cfg-options model.teacher.checkpoint=/path/to/dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth
_base_ = [
    '../_base_/datasets/distill_ade20k.py',
    '../_base_/default_runtime.py',
    '../_base_/models/distill_dinov3_base.py',
    '../_base_/schedules/distill_20k.py',
]

model = dict(
    data_preprocessor=dict(_base_.data_preprocessor, size=_base_.crop_size),
    teacher=dict(model_name='dinov3_vitl16'),
    student=dict(model_name='dinov3_vitl16'))
train_dataloader = dict(batch_size=2)  # 8 GPUs x 2 crops of 512x512
