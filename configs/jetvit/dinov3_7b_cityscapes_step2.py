# JetViT Step 2 of dinov3_7b_cityscapes.py: a new supernet with {Step-1 winner, F} per layer, distilled from the same
# teacher, FSDP2 on 8 GPUs as Step 1.
#   torchrun --nproc_per_node=8 tools/train.py configs/jetvit/dinov3_7b_cityscapes_step2.py --launcher pytorch \
#       --cfg-options model.teacher.checkpoint=... model.student.step1_arch=<best arch of tools/search.py --stage 1>
# The step1_arch below is only a placeholder of the right length (40 layers); always pass the searched one.
_base_ = [
    '../_base_/datasets/distill_cityscapes.py',
    '../_base_/default_runtime.py',
    '../_base_/models/distill_dinov3_base.py',
    '../_base_/schedules/distill_20k.py',
]

model = dict(
    data_preprocessor=dict(_base_.data_preprocessor, size=_base_.crop_size),
    teacher=dict(model_name='dinov3_vit7b16'),
    student=dict(model_name='dinov3_vit7b16', search_space=None, step1_arch='LW' * 20, grad_checkpointing=True))
train_dataloader = dict(batch_size=2)  # 8 GPUs x 2 crops of 512x1024
# keep few F layers per path so the efficient candidates keep getting trained (budgeted sampling)
custom_hooks = [dict(type='SupernetSamplerHook', mode='budgeted', max_full=4)]
# meta_init: every rank builds the model on the meta device and loads only its shard (its part of the 2 x 6.7e9
# parameters, not all of them) from the memory-mapped teacher checkpoint
runner_type = 'FSDP2Runner'  # the FSDP2 wrapper's runner (jetvit_mm/mm/engine/fsdp.py)
model_wrapper_cfg = dict(_delete_=True, type='FSDP2Wrapper', param_dtype='bfloat16', reduce_dtype='float32',
                         cpu_offload=False, checkpoint='sharded', meta_init=True)
