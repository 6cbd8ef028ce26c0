# Step-1 supernet distillation with two letters from the plugin (jetvit_pooled): P = PooledAttention (on the
# teacher's q/k/v/o) and C = DepthwiseConvMixer (its own projections, inherits nothing), next to the default L, W, F,
# at toy size (a tiny random DINOv3, generated Cityscapes-layout images; seconds on a CPU).
# Run from the repository root with the plugin importable:
#   PYTHONPATH=examples/pooled_attention python tools/train.py examples/pooled_attention/configs/distill_pooled_tiny.py
_base_ = ['../../../tests/configs/distill_supernet_tiny_cityscapes.py']

custom_imports = dict(imports=['jetvit_mm.mm', 'jetvit_pooled'], allow_failed_imports=False)
mixers = dict(
    L=dict(type='LinearAttention', conv='squeeze'),
    W=dict(type='WindowAttention', window_size=4),
    P=dict(type='PooledAttention', pool_size=2),
    C=dict(type='DepthwiseConvMixer', kernel_size=3),
    F=dict(type='FullAttention'))
model = dict(
    teacher=dict(mixers=mixers),
    student=dict(search_space=None, mixers=mixers))  # None: every declared letter except F, L W P C per layer
