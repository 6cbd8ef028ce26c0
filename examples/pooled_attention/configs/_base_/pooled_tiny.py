# What the example's two configs share: a tiny JetViT (DINOv3 architecture, random weights) declaring the plugin's
# letters next to the default ones, generated Cityscapes-layout images (tests/fixtures/datasets.py) and the
# project's runtime. P = PooledAttention (on the teacher's q/k/v/o), C = DepthwiseConvMixer (its own projections).
_base_ = [
    'mmseg::_base_/datasets/cityscapes.py',
    '../../../../configs/_base_/default_runtime.py',
]

custom_imports = dict(imports=['jetvit_mm.mm', 'jetvit_pooled'], allow_failed_imports=False)
data_root = 'data/tiny_cityscapes'
crop_size = (64, 128)
embed_dim = 32
mixers = dict(
    L=dict(type='LinearAttention', conv='squeeze'),
    W=dict(type='WindowAttention', window_size=4),
    P=dict(type='PooledAttention', pool_size=2),
    C=dict(type='DepthwiseConvMixer', kernel_size=3),
    F=dict(type='FullAttention'))
backbone = dict(model_name='dinov3_vits16', embed_dim=embed_dim, depth=4, num_heads=2, mixers=mixers)

param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
