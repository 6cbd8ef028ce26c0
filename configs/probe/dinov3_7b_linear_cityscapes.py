# DINOv3 ViT-7B/16, frozen, with a linear probe on Cityscapes (19 classes, labelTrainIds; images 1024x2048): the
# evaluation config tools/search.py scores the 7B supernet's paths with (configs/jetvit/dinov3_7b_cityscapes*.py).
#
#   torchrun --nproc_per_node=8 tools/train.py configs/probe/dinov3_7b_linear_cityscapes.py --launcher pytorch \
#       --cfg-options model.backbone.checkpoint=/path/dinov3_vit7b16_pretrain_lvd1689m-a955f4ea.pth
#   python tools/test.py configs/probe/dinov3_7b_linear_cityscapes.py work_dirs/<run>/iter_5000.pth --out m.json
#   (the probe's checkpoint holds the backbone's weights too; a hybrid also needs its model.backbone.arch)
#
# As configs/probe/dinov3_large_linear_cityscapes.py (data, augmentation, schedule, sizes: 512x1024 training crops,
# whole 1024x2048 images at evaluation, the resolution the search scores at), with the 7B backbone (40 layers,
# width 4096, SwiGLU MLP) and its 4096 channels into the linear head. A searched hybrid instead of the teacher:
#   --cfg-options model.backbone.arch=<40 letters L/W/F> model.backbone.checkpoint=/path/exported_hybrid.pth
#
# Memory: the backbone is frozen (no gradients, no optimizer states), so plain DDP replicas suffice: 6.7e9 fp32
# weights = 27 GB per GPU, plus the no-grad forward of 2 crops (2,048 tokens each; 8,192 for a whole evaluation
# image, one per GPU). Only the head trains. Fits an 80 GB GPU; the FSDP2 wrapper is for the distillation configs.
_base_ = [
    'mmseg::_base_/datasets/cityscapes.py',
    '../_base_/default_runtime.py',
    '../_base_/models/jetvit_dinov3_large_linear.py',
    '../_base_/schedules/probe_paper_5k.py',
]

crop_size = (512, 1024)
model = dict(
    data_preprocessor=dict(_base_.data_preprocessor, size=crop_size),
    backbone=dict(model_name='dinov3_vit7b16'),
    decode_head=dict(in_channels=4096, num_classes=19),
    test_cfg=dict(mode='whole'))

# DINOv3's probe augmentation, as the ViT-L probe (dinov3/eval/segmentation/transforms.py)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=(2048, 1024), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion', brightness_delta=32, contrast_range=(0.5, 1.5),
         saturation_range=(0.5, 1.5), hue_delta=90),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, num_workers=4, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, num_workers=4)
test_dataloader = val_dataloader
