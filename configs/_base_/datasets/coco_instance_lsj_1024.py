# COCO instance segmentation with ViTDet's 1024x1024 large-scale jitter: RandomResize to 0.1-2.0 x 1024, RandomCrop
# 1024 (the model pads batches to 1024x1024), 16 GPUs x 4 images. Test images are padded to the training canvas as
# in ViTDet: DINOv3's RoPE spreads its coordinates over the whole patch grid, so a 683x1024 image on a 43x64 grid
# would put every patch at another position than training's 64x64 grid did. The padding is the mean colour (BGR, as
# loaded), which training's batch padding equals. Evaluation: the mmdet base's CocoMetric (bbox and segm on
# annotations/instances_val2017.json).
_base_ = ['mmdet::_base_/datasets/coco_instance.py']

image_size = (1024, 1024)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomResize', scale=image_size, ratio_range=(0.1, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_type='absolute_range', crop_size=image_size, recompute_bbox=True,
         allow_negative_crop=True),
    dict(type='FilterAnnotations', min_gt_bbox_wh=(1e-2, 1e-2)),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='Pad', size=image_size, pad_val=dict(img=(103.53, 116.28, 123.675))),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(batch_size=4, num_workers=8, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
