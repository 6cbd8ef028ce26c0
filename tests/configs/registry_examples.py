# One buildable example per type jetvit_mm registers (tests/test_registry.py builds each under the
# mmseg and the mmdet default scope and fails if a registered type has no example here).
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)
_tiny = dict(model_name='dinov3_vits16', embed_dim=32, depth=3, num_heads=2)
examples = dict(
    JetViT=dict(type='JetViT', arch='LWF', **_tiny),
    JetViTSupernet=dict(type='JetViTSupernet', search_space='LWF', **_tiny),
    TokenClusteringJetViT=dict(type='TokenClusteringJetViT', arch='LWF', clustering='f2@0', **_tiny),
    FeatureDistiller=dict(type='FeatureDistiller', teacher=dict(type='JetViT', **_tiny),
                          student=dict(type='JetViTSupernet', search_space='LW', **_tiny)),
    SimpleFeaturePyramid=dict(type='SimpleFeaturePyramid', in_channels=32, out_channels=16),
    LinearProbeHead=dict(type='LinearProbeHead', in_channels=16, num_classes=5),
    SupernetSamplerHook=dict(type='SupernetSamplerHook', mode='budgeted', max_full=1),
    FSDP2CheckpointHook=dict(type='FSDP2CheckpointHook'),
    # token mixers (jetvit_mm/models/mixers, mirrored by jetvit_mm/mm/models/mixers.py)
    FullAttention=dict(type='FullAttention', dim=32, num_heads=2),
    WindowAttention=dict(type='WindowAttention', dim=32, num_heads=2, window_size=4),
    LinearAttention=dict(type='LinearAttention', dim=32, num_heads=2, conv='static'),
    ArchSpecHook=dict(type='ArchSpecHook'),
    CheckpointDigestHook=dict(type='CheckpointDigestHook'),
    PlainCheckpointHook=dict(type='PlainCheckpointHook'),
    LayerDecayOptimWrapperConstructor=dict(
        type='LayerDecayOptimWrapperConstructor', paramwise_cfg=dict(layer_decay_rate=0.7),
        optim_wrapper_cfg=dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.1))),
    # depth (jetvit_mm/mm/depth/)
    DPTDepthHead=dict(type='DPTDepthHead', in_channels=32, features=16, out_channels=[8, 16, 32, 32]),
    JetViTDepthAnything=dict(type='JetViTDepthAnything', model_name='dinov2_vits14', embed_dim=32, depth=4,
                             num_heads=2, out_indices=(0, 1, 2, 3), features=16, out_channels=[8, 16, 32, 32]),
    PseudoLabelDepthEstimator=dict(
        type='PseudoLabelDepthEstimator',
        teacher=dict(type='JetViTDepthAnything', model_name='dinov2_vits14', embed_dim=32, depth=4, num_heads=2,
                     out_indices=(0, 1, 2, 3), features=16, out_channels=[8, 16, 32, 32]),
        backbone=dict(type='JetViT', model_name='dinov2_vits14', arch='LWFF', embed_dim=32, depth=4, num_heads=2,
                      out_indices=(0, 1, 2, 3),
                      mixers=dict(L=dict(type='LinearAttention'), W=dict(type='WindowAttention', window_size=2),
                                  F=dict(type='FullAttention'))),
        decode_head=dict(type='DPTDepthHead', in_channels=32, features=16, out_channels=[8, 16, 32, 32])),
    ScaleShiftInvariantLoss=dict(type='ScaleShiftInvariantLoss', gradient_weight=2.0),
    DepthAnythingResize=dict(type='DepthAnythingResize', size=518),
    DA2KDataset=dict(type='DA2KDataset', data_root='data/da2k', lazy_init=True),
    DIODEDepthDataset=dict(type='DIODEDepthDataset', data_root='data/diode', scene_types=('indoors',), lazy_init=True),
    SintelDepthDataset=dict(type='SintelDepthDataset', data_root='data/sintel', lazy_init=True),
    CityscapesDepthDataset=dict(type='CityscapesDepthDataset', data_root='data/cityscapes', lazy_init=True),
    LoadZeroShotDepth=dict(type='LoadZeroShotDepth'),
    AffineInvariantDepthMetric=dict(type='AffineInvariantDepthMetric', max_depth=10.0),
    DA2KMetric=dict(type='DA2KMetric'),
)
