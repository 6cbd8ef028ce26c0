"""Where this project's OpenMMLab types live.

Every type is registered in mmengine's *root* registries. mmseg, mmdet and mmpretrain registries
are children of these roots and look a plain type name up in their parents, so ``type='JetViT'``
builds from a config whose default scope is ``mmseg`` or ``mmdet`` alike, after one line::

    custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)
"""
import difflib
import re
from typing import Optional

from mmengine.registry import DATASETS, HOOKS, METRICS, MODELS, OPTIM_WRAPPER_CONSTRUCTORS, TRANSFORMS, Registry
from mmengine.registry import root as _roots

__all__ = ['DATASETS', 'HOOKS', 'METRICS', 'MODELS', 'OPTIM_WRAPPER_CONSTRUCTORS', 'TRANSFORMS',
           'registered_types', 'unregistered_type']

# mmengine's build_from_cfg: "<type> is not in the <scope>::<registry name> registry. Please check ..."
_NOT_REGISTERED = re.compile(r'(?P<type>\S+) is not in the (?P<scope>[\w.]+)::(?P<name>\w+) registry')


def registered_types() -> dict:
    """``{registry name: [type names]}`` of everything ``jetvit_mm`` registered."""
    out = {}
    for registry in (MODELS, HOOKS, METRICS, DATASETS, TRANSFORMS, OPTIM_WRAPPER_CONSTRUCTORS):
        names = sorted(name for name, cls in registry.module_dict.items()
                       if getattr(cls, '__module__', '').startswith('jetvit_mm.'))
        if names:
            out[registry.name] = names
    return out


def _scope_registry(name: str, scope: str) -> Optional[Registry]:
    """mmengine's registry ``scope::name``: the root registry named ``name`` or one of its descendants."""
    todo = [r for r in vars(_roots).values() if isinstance(r, Registry) and r.name == name]
    while todo:
        registry = todo.pop()
        if registry.scope == scope:
            return registry
        todo.extend(registry.children.values())
    return None


def unregistered_type(error: KeyError) -> Optional[str]:
    """One line for mmengine's KeyError of a config ``type=`` that no registry holds: the type, the registry, the
    registered names closest to it (the ones that would build in that scope) or, where none is close, the types
    ``jetvit_mm`` registers there, and how a type from another package gets registered. None for any other KeyError."""
    match = _NOT_REGISTERED.search(str(error.args[0]) if error.args else '')
    if match is None:
        return None
    kind, scope, name = match.group('type', 'scope', 'name')
    registry, visible = _scope_registry(name, scope), set()
    while registry is not None:  # the names a build in this scope finds: its own, then its parents'
        visible.update(registry.module_dict)
        registry = registry.parent
    names = sorted(visible)
    close = difflib.get_close_matches(kind, names, n=4, cutoff=0.6) or [n for n in names if n.lower() == kind.lower()]
    line = f'config: type={kind!r} is not in the {scope}::{name} registry; '
    if close:
        line += f'registered names closest to it: {close}'
    else:
        line += f'jetvit_mm registers there: {registered_types().get(name, [])} ({len(names)} types in all)'
    return line + ('; a type from another package is registered when the config imports that package '
                   "(custom_imports = dict(imports=['jetvit_mm.mm', ...]))")
