# Supernet distillation of DepthAnythingV2-L's DINOv2-L backbone on the four tapped layers the DPT head reads (4, 11,
# 17, 23, after the final norm), MSE: frozen teacher, Step-1 supernet student ({L, W} per layer) inheriting every
# teacher weight, so only the teacher checkpoint is given:
#   --cfg-options model.teacher.checkpoint=/path/depth_anything_v2_vitl.pth
backbone = dict(model_name='dinov2_vitl14',
                mixers=dict(L=dict(type='LinearAttention', conv='squeeze', kernel_size=3),
                            W=dict(type='WindowAttention', window_size=16), F=dict(type='FullAttention')))
model = dict(
    type='FeatureDistiller',
    data_preprocessor=dict(test_cfg=dict(size_divisor=14)),  # test images padded to whole patches
    teacher=dict(type='JetViT', checkpoint=None, **backbone),
    student=dict(type='JetViTSupernet', search_space='LW', freeze_mlp=False, **backbone),
    distill_indices=(4, 11, 17, 23),  # DepthAnythingV2-L's tapped layers
    loss='mse')
