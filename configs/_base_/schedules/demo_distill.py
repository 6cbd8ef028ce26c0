# The demo's distillations (supernet or one fixed arch): AdamW lr 1e-3 (wd 1e-4, gradients clipped at 1), constant
# after a 20-iteration warm-up, so that a fine-tune of any length (train_cfg.max_iters=N) keeps the schedule; 600
# iterations; one random path per iteration (only the sampled candidates take part, hence the DDP setting).
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3, weight_decay=1e-4),
                     clip_grad=dict(max_norm=1.0))
param_scheduler = [dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=20)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=600)
custom_hooks = [dict(type='SupernetSamplerHook', mode='uniform')]
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=True)
