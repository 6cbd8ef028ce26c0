# What tests/test_docs_commands.py runs in place of configs/probe/dinov3_base_linear_cityscapes.py: the linear
# probe of a tiny teacher (all full attention, as the real probe's DINOv3) on generated Cityscapes-layout data,
# 2 iterations.
_base_ = ['./seg_linear_probe_tiny_cityscapes.py']

model = dict(backbone=dict(arch='FFFF'))
train_cfg = dict(max_iters=2, val_interval=2)
default_hooks = dict(checkpoint=dict(interval=2))
