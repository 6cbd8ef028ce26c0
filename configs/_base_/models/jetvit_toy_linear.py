# The demo's toy DINOv3-architecture backbone (RoPE, 4 registers, LayerScale; 12 layers like DINOv3-B, so a searched
# arch string is also a DINOv3-B arch; 64 wide, 4 heads; windows of 2 x 2 patches, so an object and its partner in
# the context task are never in one window) with a linear probe head: the segmentor of the demo's teacher (trained
# end to end) and of its linear probe (backbone frozen). The distillation configs use `backbone` for both students.
num_classes = 19  # the Cityscapes classes; the context task uses train ids 0..7
embed_dim = 64
backbone = dict(model_name='dinov3_vits16', embed_dim=embed_dim, depth=12, num_heads=4,
                mixers=dict(L=dict(type='LinearAttention', conv='squeeze'),
                            W=dict(type='WindowAttention', window_size=2), F=dict(type='FullAttention')))
model = dict(
    type='EncoderDecoder',
    # + the ImageNet normalisation of ../default_runtime.py (the experiment joins them); the task's image size
    data_preprocessor=dict(pad_val=0, seg_pad_val=255, size=(64, 128), test_cfg=dict(size_divisor=16)),  # whole patches
    backbone=dict(type='JetViT', arch='F' * 12, checkpoint=None, **backbone),
    decode_head=dict(type='LinearProbeHead', in_channels=embed_dim, num_classes=num_classes),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
