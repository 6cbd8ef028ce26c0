# Supernet distillation schedule (the paper gives no step count; our choice): 20k iterations, AdamW
# lr 1e-4 (wd 0.05), linear warm-up 1k then cosine; one random path per iteration. Written for 8 GPUs.
# No weight decay on 1-D parameters (LayerNorms, biases, LayerScale gammas) or tokens / position embedding: the
# student starts as the teacher, and decay would pull these away from the values it is distilled to match. Nor on
# the L conv's static kernel in any conv variant: 1-D in 'squeeze' / 'token' (their generator's last bias), the
# 4-D '.conv.weight' of conv='static' (docs/method.md, "Weight decay").
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05),
                     clip_grad=dict(max_norm=1.0),
                     paramwise_cfg=dict(flat_decay_mult=0., custom_keys={
                         k: dict(decay_mult=0.) for k in ('cls_token', 'reg_token', 'pos_embed', 'mask_token',
                                                          '.conv.weight')}))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=1000),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=False, begin=1000, end=20000),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=20000)
custom_hooks = [dict(type='SupernetSamplerHook', mode='uniform')]
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2000, max_keep_ckpts=3))
# each iteration trains one path: the other candidates have no gradient
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=True)
