# JetViT Step 2 for DepthAnythingV2-L: a new supernet with {Step-1 winner, F} per layer, distilled from the same
# teacher on the same four tapped layers.
#   tools/train.py configs/depth/depthanything_large_distill_step2.py --cfg-options \
#       model.teacher.checkpoint=/path/depth_anything_v2_vitl.pth \
#       model.student.step1_arch=$(cat <search dir>/best_arch_step1.txt)
# then tools/search.py configs/depth/depthanything_large_search_da2k.py <this run>/iter_20000.pth --stage 2 ...
# The step1_arch below is only a placeholder of the right length (24 layers); always pass the searched one.
_base_ = [
    '../_base_/datasets/depth_unlabeled.py',
    '../_base_/default_runtime.py',
    '../_base_/models/distill_depthanything_large.py',
    '../_base_/schedules/distill_20k.py',
]

model = dict(
    data_preprocessor=dict(_base_.data_preprocessor, size=_base_.crop_size),
    student=dict(search_space=None, step1_arch='LWLLWWLLWLWLLWLLWWLLWLWL'))
# keep few F layers per path so the efficient candidates keep getting trained (budgeted sampling)
custom_hooks = [dict(type='SupernetSamplerHook', mode='budgeted', max_full=4)]
val_dataloader = val_cfg = val_evaluator = None
test_dataloader = test_cfg = test_evaluator = None
