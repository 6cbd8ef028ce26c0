# One buildable example per type jetvit_mm registers (tests/test_registry.py builds each under the
# mmseg and the mmdet default scope and fails if a registered type has no example here).
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)
_tiny = dict(model_name='dinov3_vits16', embed_dim=32, depth=3, num_heads=2)
examples = dict(
    JetViT=dict(type='JetViT', arch='LWF', **_tiny),
    JetViTSupernet=dict(type='JetViTSupernet', search_space='LWF', **_tiny),
    FeatureDistiller=dict(type='FeatureDistiller', teacher=dict(type='JetViT', **_tiny),
                          student=dict(type='JetViTSupernet', search_space='LW', **_tiny)),
    SimpleFeaturePyramid=dict(type='SimpleFeaturePyramid', in_channels=32, out_channels=16),
    LinearProbeHead=dict(type='LinearProbeHead', in_channels=16, num_classes=5),
    SupernetSamplerHook=dict(type='SupernetSamplerHook', mode='budgeted', max_full=1),
    LayerDecayOptimWrapperConstructor=dict(
        type='LayerDecayOptimWrapperConstructor', paramwise_cfg=dict(layer_decay_rate=0.7),
        optim_wrapper_cfg=dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.1))),
)
