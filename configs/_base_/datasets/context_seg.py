# The demo's generated context task (jetvit_mm.demo.context_seg, partner task, written in the Cityscapes layout and
# read by mmseg's CityscapesDataset): 64x128 images = a 4 x 8 patch grid, an object's class depends on the colour of
# its partner patch 4 columns away; 19 Cityscapes classes, the task uses train ids 0..7. No rescaling or cropping: a
# crop could cut the partner away, and the objects sit on whole patches.
data_root = 'work_dirs/demo/data/context_seg'  # tools/demo.py writes it there (make_context_seg)
image_size = (64, 128)
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
