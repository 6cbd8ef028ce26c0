# Linear probe (frozen backbone, BN + 1x1 conv, as DINOv3's) of a JetViT on the generated context task: the
# demo's evaluation protocol for the teacher and every hybrid, and the search's downstream config.
#
#   python tools/train.py configs/demo/probe_context_seg.py --work-dir W \
#       --cfg-options model.backbone.arch=ARCH model.backbone.checkpoint=BACKBONE.pth [data roots]
#   python tools/test.py configs/demo/probe_context_seg.py W/iter_300.pth --cfg-options model.backbone.arch=ARCH
_base_ = [
    '../_base_/datasets/context_seg.py',
    '../_base_/default_runtime.py',
    '../_base_/models/jetvit_toy_linear.py',
    '../_base_/schedules/demo.py',
]

model = dict(data_preprocessor=_base_.data_preprocessor, backbone=dict(frozen=True))

max_iters = 300
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=3e-3, weight_decay=1e-4))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=20),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=20, end=max_iters, T_max=max_iters - 20, eta_min=3e-5),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
