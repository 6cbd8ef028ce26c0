# JetViT Step 1 for DINOv3-7B on Cityscapes (the paper's Table 3 model), for 8 GPUs with FSDP2: every transformer block
# of the student supernet and of the frozen teacher is its own shard unit (jetvit_mm/mm/engine/fsdp.py), parameters in
# bf16 with fp32 gradient reduction, per-block activation checkpointing on the student, sharded (DCP) checkpoints.
#   torchrun --nproc_per_node=8 tools/train.py configs/jetvit/dinov3_7b_cityscapes.py --launcher pytorch \
#       --cfg-options model.teacher.checkpoint=/path/to/dinov3_vit7b16_pretrain_lvd1689m-a955f4ea.pth
# Memory per GPU: docs/scale_out.md.
_base_ = [
    '../_base_/datasets/distill_cityscapes.py',
    '../_base_/default_runtime.py',
    '../_base_/models/distill_dinov3_base.py',
    '../_base_/schedules/distill_20k.py',
]

model = dict(
    data_preprocessor=dict(_base_.data_preprocessor, size=_base_.crop_size),
    teacher=dict(model_name='dinov3_vit7b16'),
    student=dict(model_name='dinov3_vit7b16', grad_checkpointing=True))
train_dataloader = dict(batch_size=2)  # 8 GPUs x 2 crops of 512x1024
# meta_init: every rank builds the model on the meta device and loads only its shard (its part of the 2 x 6.7e9
# parameters, not all of them) from the memory-mapped teacher checkpoint
runner_type = 'FSDP2Runner'  # the FSDP2 wrapper's runner (jetvit_mm/mm/engine/fsdp.py)
model_wrapper_cfg = dict(_delete_=True, type='FSDP2Wrapper', param_dtype='bfloat16', reduce_dtype='float32',
                         cpu_offload=False, checkpoint='sharded', meta_init=True)
