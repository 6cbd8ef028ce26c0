# NYU-Depth-V2 test images (mmseg's layout: data/nyu/images/test/*.jpg, annotations/test/*.png in uint16 millimetres)
# under the zero-shot relative-depth protocol: preprocessing as DepthAnythingV2 (short side resized to 518 keeping
# the aspect ratio, both sides multiples of 14, cv2 bicubic; NYU 480x640 -> 518x686), the disparity resized back to
# the original size (bilinear, align_corners=True), where the metric aligns scale and shift per image and compares
# (no Eigen crop).
data_root = 'data/nyu'
meta_keys = ('img_path', 'depth_map_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor', 'flip',
             'flip_direction', 'category_id')
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadDepthAnnotation', depth_rescale_factor=1e-3),
    dict(type='DepthAnythingResize', size=518, multiple=14),
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
val_dataloader = dict(
    batch_size=1, num_workers=4, persistent_workers=True, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='NYUDataset', data_root=data_root, test_mode=True,
                 data_prefix=dict(img_path='images/test', depth_map_path='annotations/test'), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='AffineInvariantDepthMetric', min_depth=1e-3, max_depth=10.0)  # NYU's depth range
test_evaluator = val_evaluator
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
