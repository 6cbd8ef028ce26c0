"""The token-mixer registry mirrored into mmengine's ``MODELS``, both ways: every core type (also one a plugin
registers later) is built by ``MODELS.build(dict(type=...))``, and a mixer class registered only in ``MODELS`` is
found by a model's ``mixers=dict(P=dict(type=...))``."""
import warnings
from typing import Optional, Type

from mmengine.registry import MODELS
from torch import nn

from jetvit_mm.models.mixers import MIXER_REGISTRY

__all__ = ['mirror_mixers']


def _into_models(name: str, cls: Type[nn.Module]) -> None:
    """Mirror one core mixer into ``MODELS``. A name ``MODELS`` already gives to another package's type (not a token
    mixer) is left to it, with a warning: configs still reach the mixer through a model's ``mixers=`` table (the
    core registry), only a bare ``MODELS.build(dict(type=name))`` builds the other type."""
    taken = MODELS.module_dict.get(name)
    if taken is cls:
        return
    if taken is not None and not hasattr(taken, 'inherits'):
        warnings.warn(f'jetvit_mm: the token mixer {name!r} ({cls.__module__}.{cls.__qualname__}) is not mirrored into '
                      f'mmengine\'s MODELS, where {name!r} is already {taken.__module__}.{taken.__qualname__}; a '
                      f'model\'s mixers=dict(X=dict(type={name!r})) still builds the mixer', stacklevel=2)
        return
    MODELS.register_module(name=name, module=cls, force=taken is not None)  # a mixer replaced by its own name


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
