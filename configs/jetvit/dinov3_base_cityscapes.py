# JetViT Step 1: supernet distillation of DINOv3-B on Cityscapes train images (labels unused), 512x1024 crops; the
# search then scores archs at the full 1024x2048.
#   tools/train.py configs/jetvit/dinov3_base_cityscapes.py --cfg-options model.teacher.checkpoint=...
_base_ = [
    '../_base_/datasets/distill_cityscapes.py',
    '../_base_/default_runtime.py',
    '../_base_/models/distill_dinov3_base.py',
    '../_base_/schedules/distill_20k.py',
]

model = dict(
    data_preprocessor=dict(_base_.data_preprocessor, size=_base_.crop_size))
