"""Runner checkpoints in the pure readers: where their JetViT sits (:func:`jetvit_part`), and the one loader an
adapter registers for what torch's allow-list refuses (``import jetvit_mm.mm``: mmengine's runner checkpoints, a
sharded FSDP2 checkpoint's directory). Without a registration the core refuses such files with its own error."""
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from ..arch import ArchSpec, spec_from_state
from .formats import strip_prefix

StateDict = Dict[str, torch.Tensor]
RUNNER_PREFIXES = ('student.', 'backbone.')  # where a runner checkpoint holds its JetViT

_FALLBACK_LOADERS: List[Callable[[str], Any]] = []


def register_fallback_loader(loader: Callable[[str], Any]) -> None:
    """``loader(path)`` reads a file that torch's default weights-only allow-list refuses; it must stay safe (e.g.
    weights-only with a few more allowed types) and raise ``pickle.UnpicklingError`` for anything else. The last one
    registered is used; registering the same one again is harmless."""
    if loader in _FALLBACK_LOADERS:
        _FALLBACK_LOADERS.remove(loader)
    _FALLBACK_LOADERS.append(loader)


def fallback_loader() -> Optional[Callable[[str], Any]]:
    return _FALLBACK_LOADERS[-1] if _FALLBACK_LOADERS else None


def jetvit_part(state: StateDict, meta: Dict[str, Any], path: str) -> Tuple[StateDict, Optional[ArchSpec]]:
    """The JetViT weights of a loaded checkpoint and the spec they were saved with (None: not known, e.g. a teacher
    file): a runner checkpoint's JetViT sits under ``student.`` (a distiller's, next to ``teacher.``) or ``backbone.``
    (a segmentor's, depth estimator's or detector's), prefix removed; any other state is the JetViT's itself."""
    for prefix in RUNNER_PREFIXES:
        if any(k.startswith(prefix) for k in state):
            return strip_prefix(state, prefix), spec_from_state(state, prefix, path)
    return state, spec_from_state(state, source=path)
