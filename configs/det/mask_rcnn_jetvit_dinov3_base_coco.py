# Mask R-CNN on a DINOv3 ViT-B/16 JetViT backbone (the teacher: arch 'F' * 12) with ViTDet's simple feature
# pyramid, fine-tuned on COCO instance segmentation with the ViTDet recipe (Li et al., 2022):
#   - 1024x1024 large-scale jitter: RandomResize to 0.1-2.0 x 1024, RandomCrop 1024, pad to 1024x1024
#     (BatchFixedSizePad in the data preprocessor, after normalisation, as ViTDet);
#   - AdamW lr 1e-4, betas (0.9, 0.999), weight decay 0.1 (none on norms, biases, LayerScale, tokens),
#     layer-wise lr decay 0.7 (LayerDecayOptimWrapperConstructor), drop path 0.1;
#   - 100 epochs at batch 64 (184375 iterations), 250-iteration warm-up, x0.1 at 88.9% and 96.3%;
#   - SimpleFeaturePyramid from the last layer: strides 4/8/16/32 + max-pooled 64, 256 channels;
#   - RPN with two convs (ViTDet); box/mask heads are mmdet's defaults (Shared2FC, FCN mask head) without
#     norm layers: ViTDet's LN conv heads need an 'LN2d' norm type that pip mmdet does not register.
#
# Weights: `checkpoint=None` is a placeholder; pass the official file (timm / Hugging Face / JetViT exports load too):
#   tools/train.py configs/det/mask_rcnn_jetvit_dinov3_base_coco.py \
#       --cfg-options model.backbone.checkpoint=/path/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth
# The recipe is for 16 GPUs x 4 images (batch 64); on fewer GPUs `--cfg-options auto_scale_lr.enable=True`
# scales the lr linearly with the total batch.
# On GPUs train in mixed precision as ViTDet: tools/train.py ... --amp.
#
# Attention per layer: the teacher uses full attention in all 12 layers. Any 12-letter L/W/F arch runs here
# (see mask_rcnn_jetvit_dinov3_base_hybrid_coco.py); W layers use 16x16-patch windows (window_size=16: 4x4
# windows on the 64x64 grid of a 1024 image). ViTDet's own interleave, windows with a global layer every
# third block, is the arch 'WWFWWFWWFWWF'.
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    'mmdet::_base_/default_runtime.py',
]
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)

image_size = (1024, 1024)
embed_dim = 768
depth = 12
batch_augments = [dict(type='BatchFixedSizePad', size=image_size, pad_mask=True)]

model = dict(
    # ImageNet mean/std in RGB as DINOv3 (the base's values); training batches padded to 1024x1024 (with 0 after
    # normalisation, i.e. the mean colour), test images by the test pipeline below
    data_preprocessor=dict(pad_size_divisor=32, batch_augments=batch_augments),
    backbone=dict(
        _delete_=True,
        type='JetViT',
        model_name='dinov3_vitb16',
        arch='F' * depth,  # the DINOv3 teacher itself
        checkpoint=None,
        window_size=16,
        drop_path_rate=0.1,
        out_indices=(-1, )),
    neck=dict(
        _delete_=True,
        type='SimpleFeaturePyramid',
        in_channels=embed_dim,
        out_channels=256,
        scale_factors=(4.0, 2.0, 1.0, 0.5),
        num_outs=5),
    rpn_head=dict(num_convs=2))

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
# Test images are padded to the training canvas as in ViTDet: DINOv3's RoPE spreads its coordinates over the whole
# patch grid, so a 683x1024 image on a 43x64 grid would put every patch at another position than training's 64x64
# grid did. The padding is the mean colour (BGR, as loaded), which training's batch padding equals.
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
# the base's CocoMetric: metric=['bbox', 'segm'] on annotations/instances_val2017.json

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
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, save_last=True, interval=interval, max_keep_ckpts=5))
log_processor = dict(type='LogProcessor', window_size=50, by_epoch=False)
auto_scale_lr = dict(enable=False, base_batch_size=64)
