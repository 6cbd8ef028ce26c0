# The demo teachers' recipe (configs/demo/teacher_context_seg.py and its half-width twin): 500 AdamW steps, linear
# warm-up then cosine, one validation at the end; demo.py's shared settings included.
_base_ = ['./demo.py']

max_iters = 500
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=3e-3, weight_decay=1e-4))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.04, by_epoch=False, begin=0, end=50),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=50, end=max_iters, T_max=max_iters - 50, eta_min=3e-5),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
