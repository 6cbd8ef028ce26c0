# A tiny mmseg linear probe whose JetViT declares the plugin's P and C letters (the search's and tools/test.py's config
# for the supernet of distill_pooled_tiny.py; its mixers must be the distillation's).
_base_ = ['../../../tests/configs/seg_linear_probe_tiny_cityscapes.py']

custom_imports = dict(imports=['jetvit_mm.mm', 'jetvit_pooled'], allow_failed_imports=False)
mixers = dict(
    L=dict(type='LinearAttention', conv='squeeze'),
    W=dict(type='WindowAttention', window_size=4),
    P=dict(type='PooledAttention', pool_size=2),
    C=dict(type='DepthwiseConvMixer', kernel_size=3),
    F=dict(type='FullAttention'))
model = dict(backbone=dict(arch='LPCF', mixers=mixers))
