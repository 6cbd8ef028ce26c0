"""Where an adapter teaches the pure checkpoint readers about other programs' checkpoints, without the core
importing it: ``import jetvit_mm.mm`` registers mmengine's runner checkpoints here (their extra pickled types and
where the JetViT sits inside them). Without a registration the core refuses such files with its own error."""
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from ..arch import ArchSpec, spec_from_state
from .legacy import refuse_legacy_meta

StateDict = Dict[str, torch.Tensor]
# (state dict, meta, path) -> (the JetViT's weights, the spec they were saved with) or None (not such a checkpoint)
JetViTReader = Callable[[StateDict, Dict[str, Any], str], Optional[Tuple[StateDict, Optional[ArchSpec]]]]

_FALLBACK_LOADERS: List[Callable[[str], Any]] = []
_JETVIT_READERS: List[JetViTReader] = []


def register_fallback_loader(loader: Callable[[str], Any]) -> None:
    """``loader(path)`` reads a file that torch's default weights-only allow-list refuses; it must stay safe (e.g.
    weights-only with a few more allowed types) and raise ``pickle.UnpicklingError`` for anything else. The last one
    registered is used; registering the same one again is harmless."""
    if loader in _FALLBACK_LOADERS:
        _FALLBACK_LOADERS.remove(loader)
    _FALLBACK_LOADERS.append(loader)


def fallback_loader() -> Optional[Callable[[str], Any]]:
    return _FALLBACK_LOADERS[-1] if _FALLBACK_LOADERS else None


def register_jetvit_reader(reader: JetViTReader) -> None:
    """``reader(state, meta, path)`` finds the JetViT inside another program's checkpoint (e.g. under ``student.``
    of a runner checkpoint) and the spec it was saved with; readers are asked in registration order."""
    if reader not in _JETVIT_READERS:
        _JETVIT_READERS.append(reader)


def jetvit_part(state: StateDict, meta: Dict[str, Any], path: str) -> Tuple[StateDict, Optional[ArchSpec]]:
    """The JetViT weights of a loaded checkpoint and the spec they were saved with (None: not known, e.g. a
    teacher file): a registered reader's answer, else the state itself with the spec of its state dict (an export
    of the old format, its arch only in its meta, is refused naming the converter)."""
    for reader in _JETVIT_READERS:
        found = reader(state, meta, path)
        if found is not None:
            return found
    refuse_legacy_meta(state, meta, path)
    return state, spec_from_state(state, source=path)
