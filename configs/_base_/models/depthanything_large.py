# DepthAnythingV2-L as mmseg's DepthEstimator: a frozen JetViT backbone (DINOv2-L, the four tapped layers 4, 11, 17,
# 23 after the final norm) and DepthAnythingV2's DPT head, whose parameters keep the original names. arch=None is
# DepthAnythingV2-L itself; a searched hybrid sets its 24 letters (--cfg-options model.backbone.arch=...).
model = dict(
    type='DepthEstimator',
    data_preprocessor=dict(  # + the ImageNet normalisation of ../default_runtime.py (the experiment joins them)
        pad_val=0,
        seg_pad_val=0,  # depth 0 = no ground truth
        test_cfg=dict(size_divisor=14)),  # pad test images to whole patches (cut off again)
    backbone=dict(
        type='JetViT',
        model_name='dinov2_vitl14',
        arch=None,  # None = 'F' * 24: DepthAnythingV2-L itself
        checkpoint=None,  # or give the weights here (any supported format) instead of the test checkpoint
        # the mixer table (the distillation's, ./distill_depthanything_large.py): its options are set here
        mixers=dict(L=dict(type='LinearAttention', conv='squeeze', kernel_size=3),
                    W=dict(type='WindowAttention', window_size=16), F=dict(type='FullAttention')),
        frozen=True),
    decode_head=dict(type='DPTDepthHead', in_channels=1024, preset='vitl', checkpoint=None),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
