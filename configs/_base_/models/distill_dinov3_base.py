# Supernet distillation of DINOv3-B: frozen teacher, Step-1 supernet student ({L, W} per layer), MSE on
# the last layer after the final norm (what the linear probe reads). The student inherits every teacher
# weight, so only the teacher checkpoint is given:
#   --cfg-options model.teacher.checkpoint=/path/to/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth
backbone = dict(model_name='dinov3_vitb16',
                mixers=dict(L=dict(type='LinearAttention', conv='squeeze', kernel_size=3),
                            W=dict(type='WindowAttention', window_size=16), F=dict(type='FullAttention')))
model = dict(
    type='FeatureDistiller',
    # the experiment adds ../default_runtime.py's ImageNet normalisation and its crop size (mmseg pads to it)
    data_preprocessor=dict(size=None, test_cfg=dict(size_divisor=16)),  # test images padded to whole patches
    teacher=dict(type='JetViT', checkpoint=None, **backbone),
    student=dict(type='JetViTSupernet', search_space='LW', freeze_mlp=False, **backbone),
    distill_indices=(-1, ),
    loss='mse')
