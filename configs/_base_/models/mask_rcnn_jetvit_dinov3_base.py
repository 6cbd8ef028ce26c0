# Mask R-CNN on a DINOv3 ViT-B/16 JetViT backbone with ViTDet's simple feature pyramid (Li et al., 2022):
#   - SimpleFeaturePyramid from the last layer: strides 4/8/16/32 + max-pooled 64, 256 channels;
#   - RPN with two convs (ViTDet); box/mask heads are mmdet's defaults (Shared2FC, FCN mask head) without norm
#     layers: ViTDet's LN conv heads need an 'LN2d' norm type that pip mmdet does not register;
#   - training batches padded to 1024x1024 (BatchFixedSizePad after normalisation: 0, the mean colour), ImageNet
#     mean/std in RGB as DINOv3 (mmdet's base values); drop path 0.1.
# arch 'F' * 12 is the DINOv3 teacher; W layers use 16x16-patch windows (4x4 windows on the 64x64 grid of a 1024
# image). Weights: checkpoint=None is a placeholder (--cfg-options model.backbone.checkpoint=...).
_base_ = ['mmdet::_base_/models/mask-rcnn_r50_fpn.py']

embed_dim = 768
depth = 12
batch_augments = [dict(type='BatchFixedSizePad', size=(1024, 1024), pad_mask=True)]

model = dict(
    data_preprocessor=dict(pad_size_divisor=32, batch_augments=batch_augments),
    backbone=dict(
        _delete_=True,
        type='JetViT',
        model_name='dinov3_vitb16',
        arch='F' * depth,  # the DINOv3 teacher itself
        checkpoint=None,
        mixers=dict(L=dict(type='LinearAttention', conv='squeeze'), W=dict(type='WindowAttention', window_size=16),
                    F=dict(type='FullAttention')),
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
