# JetViT Step 2 of dinov3_large_ade20k.py: a new supernet with {Step-1 winner, F} per layer, distilled from the same
# teacher.
#   tools/train.py configs/jetvit/dinov3_large_ade20k_step2.py \
#       --cfg-options model.teacher.checkpoint=... model.student.step1_arch=<best arch of tools/search.py --stage 1>
# The step1_arch below is only a placeholder of the right length (24 layers); always pass the searched one.
_base_ = [
    '../_base_/datasets/distill_ade20k.py',
    '../_base_/default_runtime.py',
    '../_base_/models/distill_dinov3_base.py',
    '../_base_/schedules/distill_20k.py',
]

model = dict(
    data_preprocessor=dict(_base_.data_preprocessor, size=_base_.crop_size),
    teacher=dict(model_name='dinov3_vitl16'),
    student=dict(model_name='dinov3_vitl16', search_space=None, step1_arch='LWLLWWLLWLWLLWLLWWLLWLWL'))
train_dataloader = dict(batch_size=2)  # 8 GPUs x 2 crops of 512x512
# keep few F layers per path so the efficient candidates keep getting trained (budgeted sampling)
custom_hooks = [dict(type='SupernetSamplerHook', mode='budgeted', max_full=4)]
