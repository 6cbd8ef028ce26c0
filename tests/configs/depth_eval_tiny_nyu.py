# A tiny JetViT-DepthAnything (DINOv2 architecture, 4 layers, random weights unless given) evaluated with the
# zero-shot relative-depth protocol (affine-invariant AbsRel / delta1) on generated NYU-layout data: the tests use
# it; it runs in seconds on a CPU. The structure is that of configs/depth/depthanything_large_eval.py.
#   python tools/test.py tests/configs/depth_eval_tiny_nyu.py CHECKPOINT \
#       --cfg-options test_dataloader.dataset.data_root=...
# CHECKPOINT: an mmseg-layout depth checkpoint (jetvit_mm.models.depth_anything.export_mmseg_checkpoint of a
# DepthAnythingV2-format file, or a tools/train.py checkpoint of a depth config).
_base_ = ['../../configs/_base_/default_runtime.py']  # mmseg's runtime, the plugin import, the ImageNet normalisation

data_root = 'data/tiny_nyu'
input_size = 56  # DepthAnythingV2 uses 518: short side resized to it, both sides multiples of 14
backbone = dict(model_name='dinov2_vits14', embed_dim=32, depth=4, num_heads=2, out_indices=(0, 1, 2, 3),
                mixers=dict(L=dict(type='LinearAttention', conv='squeeze'),
                            W=dict(type='WindowAttention', window_size=2), F=dict(type='FullAttention')))
head = dict(in_channels=32, features=16, out_channels=[8, 16, 32, 32])
model = dict(
    type='DepthEstimator',
    data_preprocessor=dict(_base_.data_preprocessor, pad_val=0, seg_pad_val=0),  # depth 0 = invalid
    backbone=dict(type='JetViT', arch=None, checkpoint=None, frozen=True, **backbone),
    decode_head=dict(type='DPTDepthHead', checkpoint=None, **head),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))

meta_keys = ('img_path', 'depth_map_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor', 'flip',
             'flip_direction', 'category_id')
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadDepthAnnotation', depth_rescale_factor=1e-3),  # uint16 millimetres -> metres
    dict(type='DepthAnythingResize', size=input_size),  # the prediction is resized back to the original size
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
val_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='NYUDataset', data_root=data_root, test_mode=True,
                 data_prefix=dict(img_path='images/test', depth_map_path='annotations/test'), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='AffineInvariantDepthMetric', min_depth=1e-3, max_depth=10.0)
test_evaluator = val_evaluator
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(logger=dict(type='LoggerHook', interval=1))
log_processor = dict(by_epoch=False)
