"""Where this project's OpenMMLab types live.

Every type is registered in mmengine's *root* registries. mmseg, mmdet and mmpretrain registries
are children of these roots and look a plain type name up in their parents, so ``type='JetViT'``
builds from a config whose default scope is ``mmseg`` or ``mmdet`` alike, after one line::

    custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)
"""
from mmengine.registry import DATASETS, HOOKS, METRICS, MODELS, OPTIM_WRAPPER_CONSTRUCTORS, TRANSFORMS

__all__ = ['DATASETS', 'HOOKS', 'METRICS', 'MODELS', 'OPTIM_WRAPPER_CONSTRUCTORS', 'TRANSFORMS',
           'registered_types']


def registered_types() -> dict:
    """``{registry name: [type names]}`` of everything ``jetvit_mm`` registered."""
    out = {}
    for registry in (MODELS, HOOKS, METRICS, DATASETS, TRANSFORMS, OPTIM_WRAPPER_CONSTRUCTORS):
        names = sorted(name for name, cls in registry.module_dict.items()
                       if getattr(cls, '__module__', '').startswith('jetvit_mm.'))
        if names:
            out[registry.name] = names
    return out
