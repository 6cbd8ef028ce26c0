# Unlabeled images for depth distillation and pseudo-label fine-tuning: any folder of images, subfolders included
# (data/depth_unlabeled/images/**/*, every suffix mmcv reads: jpg/jpeg, png, bmp, tif/tiff, webp, either case),
# short side resized to 518-777 and cropped to 518x518 (37x37 patches,
# DepthAnythingV2's training resolution), batch 8 GPUs x 4. Labels are not read.
crop_size = (518, 518)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResize', scale=(4096, 518), ratio_range=(1.0, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
# every image format mmcv's OpenCV backend reads, either case (the listing matches suffixes case-sensitively)
img_suffix = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp',
              '.JPG', '.JPEG', '.PNG', '.BMP', '.TIF', '.TIFF', '.WEBP')
train_dataloader = dict(
    batch_size=4, num_workers=4, persistent_workers=True, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='BaseSegDataset', data_root='data/depth_unlabeled', data_prefix=dict(img_path='images'),
                 img_suffix=img_suffix, pipeline=train_pipeline))  # labels are not read
