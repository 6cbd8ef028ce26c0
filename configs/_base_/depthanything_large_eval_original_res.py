# What configs/jetvit/depthanything_large_eval_{diode,sintel,cityscapes}.py share: depthanything_large_eval.py's
# model and zero-shot protocol, run at each image's original resolution (the JetViT paper's Table 4: the short side
# kept, both sides rounded to multiples of 14), with the ground truth read by LoadZeroShotDepth. Each of those
# configs adds its dataset (type, data_root, options) and its depth range; this file alone has no dataset.
_base_ = ['../jetvit/depthanything_large_eval.py']

meta_keys = ('img_path', 'depth_map_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor', 'flip',
             'flip_direction')
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadZeroShotDepth'),
    dict(type='DepthAnythingResize', size=None, multiple=14),  # None: each image's own short side
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
val_dataloader = dict(dataset=dict(_delete_=True, test_mode=True, pipeline=test_pipeline))  # no NYU keys left
test_dataloader = val_dataloader
