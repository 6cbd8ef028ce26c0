# JetViT Step 1 for DepthAnythingV2-Giant (the paper's Table 4 model): supernet distillation of its DINOv2-g backbone
# (1.1B) on the four tapped layers the DPT head reads (9, 19, 29, 39, after the final norm), MSE, images only, for
# 8 GPUs with FSDP2 (bf16 parameters, fp32 reduction, per-block activation checkpointing on the student).
#   torchrun --nproc_per_node=8 tools/train.py configs/depth/depthanything_giant_distill.py --launcher pytorch \
#       --cfg-options model.teacher.checkpoint=/path/depth_anything_v2_vitg.pth
_base_ = [
    '../_base_/datasets/depth_unlabeled.py',
    '../_base_/default_runtime.py',
    '../_base_/models/distill_depthanything_large.py',
    '../_base_/schedules/distill_20k.py',
]

model = dict(
    data_preprocessor=dict(_base_.data_preprocessor, size=_base_.crop_size),
    teacher=dict(model_name='dinov2_vitg14'),
    student=dict(model_name='dinov2_vitg14', grad_checkpointing=True),
    distill_indices=(9, 19, 29, 39))  # DepthAnythingV2-G's tapped layers
runner_type = 'FSDP2Runner'  # the FSDP2 wrapper's runner (jetvit_mm/mm/engine/fsdp.py)
model_wrapper_cfg = dict(_delete_=True, type='FSDP2Wrapper', param_dtype='bfloat16', reduce_dtype='float32',
                         cpu_offload=False, checkpoint='sharded')
# distillation makes no predictions: no validation or test loop
val_dataloader = val_cfg = val_evaluator = None
test_dataloader = test_cfg = test_evaluator = None
