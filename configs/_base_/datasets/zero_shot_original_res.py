# The zero-shot depth sets at each image's original resolution (the JetViT paper's Table 4: the short side kept, both
# sides rounded to multiples of 14), the ground truth read by LoadZeroShotDepth. The experiment adds the dataset
# (type, data_root, options) and its depth range (the evaluator).
meta_keys = ('img_path', 'depth_map_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor', 'flip',
             'flip_direction')
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadZeroShotDepth'),
    dict(type='DepthAnythingResize', size=None, multiple=14),  # None: each image's own short side
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
val_dataloader = dict(
    batch_size=1, num_workers=4, persistent_workers=True, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(test_mode=True, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
