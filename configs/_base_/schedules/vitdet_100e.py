# ViTDet's fine-tuning schedule: AdamW lr 1e-4, betas (0.9, 0.999), weight decay 0.1 (none on norms, biases,
# LayerScale, tokens), layer-wise lr decay 0.7 (LayerDecayOptimWrapperConstructor); 100 epochs at batch 64 (184375
# iterations), 250-iteration warm-up, x0.1 at 88.9% and 96.3%; validation every 5000 iterations. Written for 16 GPUs
# x 4 images; on fewer GPUs `--cfg-options auto_scale_lr.enable=True` scales the lr linearly with the total batch.
optim_wrapper = dict(
    type='OptimWrapper',
    constructor='LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.7),
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.1))

max_iters = 184375  # 100 epochs of 118k images at batch 64
interval = 5000
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=250),
    dict(type='MultiStepLR', by_epoch=False, begin=0, end=max_iters, milestones=[163889, 177546], gamma=0.1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=interval,
                 dynamic_intervals=[(max_iters // interval * interval + 1, max_iters)])
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
auto_scale_lr = dict(enable=False, base_batch_size=64)
