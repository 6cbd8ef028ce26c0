# What every demo config shares: the generated context task (jetvit_mm.datasets.context_seg, partner task,
# Cityscapes layout, 64x128 images = a 4 x 8 patch grid: an object's class depends on the colour of its partner
# patch 4 columns away) and the toy DINOv3-architecture backbone: 12 layers like DINOv3-B (so a searched arch
# string is also a DINOv3-B arch), 64 wide, 4 heads, window attention in 2 x 2-patch windows (an object and its
# partner are never in the same window).
_base_ = ['mmseg::_base_/default_runtime.py']
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)

data_root = 'work_dirs/demo/data/context_seg'  # tools/demo.py writes it there (make_context_seg)
image_size = (64, 128)
num_classes = 19  # the Cityscapes classes; the task uses train ids 0..7
embed_dim = 64
backbone = dict(model_name='dinov3_vits16', embed_dim=embed_dim, depth=12, num_heads=4, window_size=2)

data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255,
    size=image_size)

# the segmentor of the teacher and of the linear probe (they differ in backbone.frozen and the schedule)
model = dict(
    type='EncoderDecoder',
    data_preprocessor=data_preprocessor,
    backbone=dict(type='JetViT', arch='F' * 12, checkpoint=None, **backbone),
    decode_head=dict(type='LinearProbeHead', in_channels=embed_dim, num_classes=num_classes),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))

# no rescaling or cropping: a crop could cut the marker away, and the objects sit on whole patches
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
dataset_type = 'CityscapesDataset'
train_dataloader = dict(
    batch_size=8, num_workers=0, persistent_workers=False,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root, pipeline=train_pipeline,
                 data_prefix=dict(img_path='leftImg8bit/train', seg_map_path='gtFine/train')))
val_dataloader = dict(
    batch_size=8, num_workers=0, persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, pipeline=test_pipeline,
                 data_prefix=dict(img_path='leftImg8bit/val', seg_map_path='gtFine/val')))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=100000, save_last=True, max_keep_ckpts=1))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
