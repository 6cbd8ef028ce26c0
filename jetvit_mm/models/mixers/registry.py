"""The mixer registry: type name -> token-mixer class, plain Python (no OpenMMLab).

Another package adds a type with :func:`register_mixer`; importing it (a config's ``custom_imports``) is all it
takes. The OpenMMLab adapter mirrors registrations into mmengine's ``MODELS`` and back (:meth:`MixerRegistry.subscribe`,
:meth:`MixerRegistry.add_resolver`).
"""
from typing import Callable, Dict, List, Optional, Type

from torch import nn

MixerClass = Type[nn.Module]

__all__ = ['MIXER_REGISTRY', 'MixerRegistry', 'register_mixer']


class MixerRegistry:
    """Registered token-mixer classes by name, with listeners told of every registration and resolvers asked for
    names registered elsewhere."""

    def __init__(self) -> None:
        self._classes: Dict[str, MixerClass] = {}
        self._listeners: List[Callable[[str, MixerClass], None]] = []
        self._resolvers: List[Callable[[str], Optional[MixerClass]]] = []

    def register(self, cls: MixerClass, name: Optional[str] = None, force: bool = False) -> MixerClass:
        """Register ``cls`` as ``name`` (default: its class name); another class under a taken name needs ``force``."""
        name = name or cls.__name__
        if not isinstance(cls, type) or not issubclass(cls, nn.Module):
            raise TypeError(f'a token mixer must be an nn.Module subclass, got {cls!r} for {name!r}')
        taken = self._classes.get(name)
        if taken is not None and taken is not cls and not force:
            raise KeyError(f'mixer type {name!r} is already registered as {taken.__module__}.{taken.__qualname__}; '
                           f'pick another name or pass force=True')
        self._classes[name] = cls
        for listener in self._listeners:
            listener(name, cls)
        return cls

    def get(self, name: str) -> Optional[MixerClass]:
        """The class registered as ``name`` (here, else by a resolver), or None."""
        if name in self._classes:
            return self._classes[name]
        for resolver in self._resolvers:
            found = resolver(name)
            if found is not None:
                return found
        return None

    def names(self) -> List[str]:
        return sorted(self._classes)

    def subscribe(self, listener: Callable[[str, MixerClass], None]) -> None:
        """Call ``listener(name, cls)`` for every registration, those made already included."""
        if listener in self._listeners:
            return
        self._listeners.append(listener)
        for name, cls in list(self._classes.items()):
            listener(name, cls)

    def add_resolver(self, resolver: Callable[[str], Optional[MixerClass]]) -> None:
        """``resolver(name)`` finds classes registered elsewhere (mmengine's ``MODELS``); asked in order."""
        if resolver not in self._resolvers:
            self._resolvers.append(resolver)


MIXER_REGISTRY = MixerRegistry()


def register_mixer(cls: Optional[MixerClass] = None, *, name: Optional[str] = None, force: bool = False):
    """Register a token-mixer class, as a decorator (``@register_mixer`` or ``@register_mixer(name='X')``) or a call;
    a model checks the mixer contract (:mod:`jetvit_mm.models.mixers.base`) when built with it as a letter."""
    if cls is None:
        return lambda c: MIXER_REGISTRY.register(c, name, force)
    return MIXER_REGISTRY.register(cls, name, force)
