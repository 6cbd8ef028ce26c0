"""The token-mixer registry mirrored into mmengine's ``MODELS``, both ways.

Every type registered in the pure core (:func:`jetvit_mm.models.mixers.register_mixer`, also later, by a plugin
package a config's ``custom_imports`` imports) is registered in ``MODELS`` under the same name, so
``MODELS.build(dict(type='WindowAttention', dim=..., num_heads=...))`` works; and a mixer class a plugin registers
only in ``MODELS`` (``@MODELS.register_module()``) is found by a model's ``mixers=dict(P=dict(type=...))``.
"""
from typing import Optional, Type

from mmengine.registry import MODELS
from torch import nn

from jetvit_mm.models.mixers import MIXER_REGISTRY

__all__ = ['mirror_mixers']


def _into_models(name: str, cls: Type[nn.Module]) -> None:
    if MODELS.module_dict.get(name) is not cls:
        MODELS.register_module(name=name, module=cls, force=name in MODELS.module_dict)


def _from_models(name: str) -> Optional[Type[nn.Module]]:
    """A class registered only in ``MODELS`` (or a child scope's registry) that declares the mixer contract's
    ``inherits``; registered in the core on first use."""
    cls = MODELS.get(name)
    if isinstance(cls, type) and issubclass(cls, nn.Module) and hasattr(cls, 'inherits'):
        return MIXER_REGISTRY.register(cls, name)
    return None


def mirror_mixers() -> None:
    """Subscribe ``MODELS`` to the core registry and let the core find ``MODELS``' mixers (idempotent)."""
    MIXER_REGISTRY.subscribe(_into_models)
    MIXER_REGISTRY.add_resolver(_from_models)


mirror_mixers()
