# DepthAnythingV2-L (or a searched JetViT-DepthAnything-L hybrid) under the zero-shot relative-depth protocol:
# per image, least-squares scale and shift of the predicted disparity to the GT disparity, then AbsRel and delta1
# (AffineInvariantDepthMetric; mmseg's DepthMetric does no alignment). Data: NYU-Depth-V2 in mmseg's layout
# (data/nyu/images/test/*.jpg, annotations/test/*.png in uint16 millimetres).
#
# Weights: the model is mmseg's DepthEstimator with a JetViT backbone (the four tapped layers 4, 11, 17, 23, after
# the final norm) and DepthAnythingV2's DPT head, whose parameters keep the original names. Convert the official
# file once to this layout (backbone.* + decode_head.*), then test it:
#   python tools/convert_depth_anything.py depth_anything_v2_vitl.pth work_dirs/depth_anything_v2_vitl_mmseg.pth
#   python tools/test.py configs/jetvit/depthanything_large_eval.py work_dirs/depth_anything_v2_vitl_mmseg.pth \
#       --out metrics.json
# A searched hybrid (tools/search.py --export writes hybrid_<arch>_with_head.pth) or a fine-tuned one
# (depthanything_large_pseudolabel_finetune.py): the same command with --cfg-options model.backbone.arch=<24 letters>.
#
# Preprocessing as DepthAnythingV2: short side resized to 518 keeping the aspect ratio, both sides multiples of 14
# (NYU 480x640 -> 518x686), cv2 bicubic, ImageNet mean/std; the disparity is resized back to the original size
# (bilinear, align_corners=True), where the metric compares (no Eigen crop).
# The paper's zero-shot sets at their original resolution: depthanything_large_eval_{diode,sintel,cityscapes}.py.
_base_ = ['mmseg::_base_/default_runtime.py']
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)

data_root = 'data/nyu'
model = dict(
    type='DepthEstimator',
    data_preprocessor=dict(
        type='SegDataPreProcessor',
        mean=[123.675, 116.28, 103.53],  # ImageNet statistics (RGB, 0-255)
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        pad_val=0,
        seg_pad_val=0),  # depth 0 = no ground truth
    backbone=dict(
        type='JetViT',
        model_name='dinov2_vitl14',
        arch=None,  # None = 'F' * 24: DepthAnythingV2-L itself
        checkpoint=None,  # or give the weights here (any supported format) instead of the test checkpoint
        frozen=True),
    decode_head=dict(type='DPTDepthHead', in_channels=1024, preset='vitl', checkpoint=None),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))

meta_keys = ('img_path', 'depth_map_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor', 'flip',
             'flip_direction', 'category_id')
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadDepthAnnotation', depth_rescale_factor=1e-3),
    dict(type='DepthAnythingResize', size=518, multiple=14),
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
val_dataloader = dict(
    batch_size=1, num_workers=4, persistent_workers=True, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='NYUDataset', data_root=data_root, test_mode=True,
                 data_prefix=dict(img_path='images/test', depth_map_path='annotations/test'), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='AffineInvariantDepthMetric', min_depth=1e-3, max_depth=10.0)  # NYU's depth range
test_evaluator = val_evaluator
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
