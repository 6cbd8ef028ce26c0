# What every demo run shares: a log line every 50 iterations, only the last checkpoint kept, seed 0 (one thread per
# process makes the runs reproducible). Each demo config sets its optimiser and iterations.
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=100000, save_last=True, max_keep_ckpts=1))
randomness = dict(seed=0)
