"""jetvit_pooled: a JetViT token-mixer plugin, pooled key/value attention (``PooledAttention``).

Importing the package registers the mixer; a config joins it as a new letter::

    custom_imports = dict(imports=['jetvit_mm.mm', 'jetvit_pooled'], allow_failed_imports=False)
    model = dict(backbone=dict(type='JetViT', mixers=dict(L=..., W=..., F=..., P=dict(type='PooledAttention'))))
"""
from .pooled import PooledAttention, pooled_attention_reference

__all__ = ['PooledAttention', 'pooled_attention_reference']
