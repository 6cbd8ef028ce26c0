# JetViT Step 1 for DepthAnythingV2-L: supernet distillation of its DINOv2-L backbone on the four tapped layers the
# DPT head reads (4, 11, 17, 23, after the final norm), MSE, images only (no depth labels).
#   tools/train.py configs/depth/depthanything_large_distill.py \
#       --cfg-options model.teacher.checkpoint=/path/depth_anything_v2_vitl.pth
# The student starts from every teacher weight. Then search with depthanything_large_search_da2k.py; Step 2
# ({Step-1 winner, F} per layer, budgeted sampling) is depthanything_large_distill_step2.py.
#
# Images: any folder of unlabeled images (../_base_/datasets/depth_unlabeled.py); schedule
# ../_base_/schedules/distill_20k.py (ours: the paper gives none).
_base_ = [
    '../_base_/datasets/depth_unlabeled.py',
    '../_base_/default_runtime.py',
    '../_base_/models/distill_depthanything_large.py',
    '../_base_/schedules/distill_20k.py',
]

model = dict(data_preprocessor=dict(_base_.data_preprocessor, size=_base_.crop_size))
# distillation makes no predictions: no validation or test loop
val_dataloader = val_cfg = val_evaluator = None
test_dataloader = test_cfg = test_evaluator = None
