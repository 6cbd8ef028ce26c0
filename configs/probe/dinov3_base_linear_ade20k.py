# DINOv3 ViT-B/16, frozen, with a linear probe on ADE20K (150 classes; label 0 "other" is ignored).
#
#   torchrun --nproc_per_node=8 tools/train.py configs/probe/dinov3_base_linear_ade20k.py --launcher pytorch \
#       --cfg-options model.backbone.checkpoint=/path/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth
#   python tools/test.py configs/probe/dinov3_base_linear_ade20k.py work_dirs/<run>/iter_5000.pth --out m.json
#   (the probe's checkpoint holds the backbone's weights too; a hybrid also needs its model.backbone.arch)
#
# Batch: 8 GPUs x 2 crops = 16, as DINOv3; data in data/ade/ADEChallengeData2016 (images/, annotations/).
# Schedule: the JetViT paper's probe (5k iters, Adam 1e-4). For DINOv3's protocol (40k iters, AdamW 1e-3,
# warmup + cosine) replace the last `_base_` entry by '../_base_/schedules/probe_dinov3_40k.py'.
# A searched hybrid instead of the teacher (see the model base):
#   --cfg-options model.backbone.arch=<12 letters L/W/F> model.backbone.checkpoint=/path/exported_hybrid.pth
#
# Labels: LoadAnnotations(reduce_zero_label=True) maps 0 ("other") to 255 (ignored) and k to k - 1.
# Sizes (DINOv3's protocol): 512x512 training crops of images whose short side is rescaled to 512 x 0.5-2.0;
# evaluation with the short side at 512 and 512x512 sliding windows, stride 341. Multiples of the 16-pixel
# patch; test images are padded to a multiple of 16 by the data preprocessor.
_base_ = [
    'mmseg::_base_/datasets/ade20k.py',
    '../_base_/default_runtime.py',
    '../_base_/models/jetvit_dinov3_base_linear.py',
    '../_base_/schedules/probe_paper_5k.py',
]

crop_size = (512, 512)
model = dict(
    data_preprocessor=dict(_base_.data_preprocessor, size=crop_size),
    decode_head=dict(num_classes=150),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 341)))

# DINOv3's probe augmentation (dinov3/eval/segmentation/transforms.py): random rescale, crop, flip, then its
# photometric distortion: brightness +-32, contrast and saturation 0.5-1.5, hue over the whole circle (its
# +-0.5 turn = +-90 in OpenCV's 0-180 hue units; mmseg's default is +-18), each with probability 0.5
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(2048, 512), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion', brightness_delta=32, contrast_range=(0.5, 1.5),
         saturation_range=(0.5, 1.5), hue_delta=90),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, num_workers=4, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, num_workers=4)
test_dataloader = val_dataloader
