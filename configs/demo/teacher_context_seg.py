# The demo's teacher: a 12-layer DINOv3-architecture JetViT (all full attention, RoPE, 4 registers) trained from
# scratch end to end with a linear probe head on the generated context task (backbone not frozen).
#
#   python tools/train.py configs/demo/teacher_context_seg.py --work-dir work_dirs/demo/teacher \
#       --cfg-options train_dataloader.dataset.data_root=D val_dataloader.dataset.data_root=D
_base_ = [
    '../_base_/datasets/context_seg.py',
    '../_base_/default_runtime.py',
    '../_base_/models/jetvit_toy_linear.py',
    '../_base_/schedules/demo.py',
]

model = dict(data_preprocessor=_base_.data_preprocessor, backbone=dict(frozen=False))

max_iters = 500
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=3e-3, weight_decay=1e-4))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.04, by_epoch=False, begin=0, end=50),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=50, end=max_iters, T_max=max_iters - 50, eta_min=3e-5),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
