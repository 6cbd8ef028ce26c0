# A tiny mmdet Mask R-CNN on a JetViT backbone with the simple feature pyramid, on generated
# COCO-layout data: tests use it; it runs in seconds on a CPU.
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    '../../configs/_base_/det_runtime.py',  # mmdet's runtime, the plugin import, its runner and checkpoint hooks
]

data_root = 'data/tiny_coco/'
image_size = (64, 96)
embed_dim = 32
neck_channels = 32

model = dict(
    data_preprocessor=dict(pad_size_divisor=32),
    backbone=dict(
        _delete_=True,
        type='JetViT',
        model_name='dinov3_vits16',
        arch='LWLF',
        embed_dim=embed_dim,
        depth=4,
        num_heads=2,
        mixers=dict(L=dict(type='LinearAttention', conv='squeeze'), W=dict(type='WindowAttention', window_size=4),
                    F=dict(type='FullAttention')),
        checkpoint=None),
    neck=dict(_delete_=True, type='SimpleFeaturePyramid', in_channels=embed_dim, out_channels=neck_channels,
              num_outs=5),
    rpn_head=dict(in_channels=neck_channels, feat_channels=neck_channels),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=neck_channels),
        bbox_head=dict(in_channels=neck_channels, fc_out_channels=64),
        mask_roi_extractor=dict(out_channels=neck_channels),
        mask_head=dict(in_channels=neck_channels, conv_out_channels=neck_channels)),
    # keep low-score detections so an untrained tiny model still yields boxes for CocoMetric
    test_cfg=dict(rcnn=dict(score_thr=0.0)))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='Resize', scale=image_size[::-1], keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size[::-1], keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator

optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05))
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=2, val_interval=2)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=1, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
