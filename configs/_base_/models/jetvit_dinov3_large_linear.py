# DINOv3 ViT-L/16 linear segmentation probe (the DINOv3 protocol): a frozen JetViT backbone, the last
# layer's patch tokens after the final norm (no cls token), Dropout2d(0.1) -> BN -> 1x1 conv head.
#
# Weights: `checkpoint=None` is a placeholder (random weights build, but a probe of them means nothing).
# Pass the official file on the command line:
#   --cfg-options model.backbone.checkpoint=/path/dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth
# timm / Hugging Face DINOv3 files and JetViT's own exports load too (the format is detected).
#
# A searched hybrid instead of the teacher: its arch string (one L/W/F letter per layer, 24 here) and
# the checkpoint tools/export_hybrid.py wrote:
#   --cfg-options model.backbone.arch=LWLLWLWLLWLWLLFLWLWLWLFW model.backbone.checkpoint=/path/exported_hybrid.pth
# (this example string has F at layers 14 and 22 (0-based), the paper's DINOv3-L placement; write your search's.)
# (also pass the supernet's mixer options if it used non-default ones, one key at a time:
# model.backbone.mixers.W.window_size=8 model.backbone.mixers.L.conv=static; a dict(...) value does not parse).
model = dict(
    type='EncoderDecoder',
    data_preprocessor=dict(  # + the ImageNet normalisation of ../default_runtime.py (the experiment joins them)
        pad_val=0,
        seg_pad_val=255,
        size=None,  # the experiment sets its training crop size
        test_cfg=dict(size_divisor=16)),  # pad test images to whole patches (the padding is cut off again)
    backbone=dict(
        type='JetViT',
        model_name='dinov3_vitl16',
        arch=None,  # None = 'F' * 24: the DINOv3 teacher itself
        checkpoint=None,
        out_indices=(-1, ),
        mixers=dict(L=dict(type='LinearAttention', conv='squeeze'), W=dict(type='WindowAttention', window_size=16),
                    F=dict(type='FullAttention')),  # the mixer table: its options are set here
        frozen=True),
    decode_head=dict(
        type='LinearProbeHead',
        in_channels=1024,
        num_classes=19,  # the experiment sets it (Cityscapes 19, ADE20K 150)
        dropout_ratio=0.1,
        ignore_index=255,
        loss_decode=dict(type='mmseg.CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))  # Cityscapes evaluates whole images; ADE20K switches to sliding windows
