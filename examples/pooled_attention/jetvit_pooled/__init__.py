"""jetvit_pooled: a JetViT token-mixer plugin, pooled key/value attention (``PooledAttention``, which inherits the
teacher's q/k/v/o) and a depthwise-conv token mixer with its own projections (``DepthwiseConvMixer``, which inherits
nothing: ``inherits = 'none'``).

Importing the package registers the mixers; a config joins each as a new letter::

    custom_imports = dict(imports=['jetvit_mm.mm', 'jetvit_pooled'], allow_failed_imports=False)
    model = dict(backbone=dict(type='JetViT', mixers=dict(L=..., W=..., F=..., P=dict(type='PooledAttention'))))
"""
from .conv_mixer import DepthwiseConvMixer, depthwise_conv_mixer_reference
from .pooled import PooledAttention, pooled_attention_reference

__all__ = ['DepthwiseConvMixer', 'PooledAttention', 'depthwise_conv_mixer_reference', 'pooled_attention_reference']
