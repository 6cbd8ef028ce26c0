# DA-2K (data/da2k: annotations.json, {image path relative to data_root: [{point1: [h, w], point2: [h, w],
# closer_point}]}, and the images; every point is checked against its image when the dataset loads), scored by pair
# accuracy (DA2KMetric, da2k_acc, percent). As in the paper, each image's short edge is resized to 1022 pixels,
# aspect ratio kept (long edge to a multiple of 14).
data_root = 'data/da2k'
da2k_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='DepthAnythingResize', size=1022, multiple=14),  # short edge 1022 = 73 x 14 (the paper's)
    dict(type='PackSegInputs',
         meta_keys=('img_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor', 'da2k_pairs')),
]
test_pipeline = da2k_pipeline
val_dataloader = dict(
    batch_size=1, num_workers=4, persistent_workers=True, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='DA2KDataset', data_root=data_root, pipeline=da2k_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='DA2KMetric')
test_evaluator = val_evaluator
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
