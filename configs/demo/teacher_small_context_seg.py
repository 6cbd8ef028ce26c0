# The demo's smaller teacher: the teacher of teacher_context_seg.py at half its width (32 wide, 2 heads of the same
# 16 channels; 12 layers, RoPE, 4 registers), trained with the same recipe and steps: what a user would pick instead
# of a searched hybrid. At DINOv3 scale half of DINOv3-B's width is DINOv3-S (384 wide, 6 heads, 12 layers): the
# demo's latency column times it with those shapes.
#
#   python tools/train.py configs/demo/teacher_small_context_seg.py --work-dir work_dirs/demo/teacher_small \
#       --cfg-options train_dataloader.dataset.data_root=D val_dataloader.dataset.data_root=D
_base_ = [
    '../_base_/datasets/context_seg.py',
    '../_base_/default_runtime.py',
    '../_base_/models/jetvit_toy_linear.py',
    '../_base_/schedules/demo.py',
]

embed_dim = 32
model = dict(data_preprocessor=_base_.data_preprocessor,
             backbone=dict(frozen=False, embed_dim=embed_dim, num_heads=2),
             decode_head=dict(in_channels=embed_dim))

# the teacher's recipe (configs/demo/teacher_context_seg.py), unchanged
max_iters = 500
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=3e-3, weight_decay=1e-4))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.04, by_epoch=False, begin=0, end=50),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=50, end=max_iters, T_max=max_iters - 50, eta_min=3e-5),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
