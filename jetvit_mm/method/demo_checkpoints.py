"""The demo's checkpoint plumbing: a JetViT checkpoint cut out of a runner checkpoint, and the digests its caches are
keyed by."""
import hashlib
from pathlib import Path
from typing import Dict

import torch

from jetvit_mm.models.checkpoint import read, save


def _runner_state(path: Path) -> Dict[str, torch.Tensor]:
    """The state dict of a checkpoint the runner wrote (the demo's own work dir)."""
    state = read(path).raw
    return state.get('state_dict', state)


def extract_backbone(checkpoint: Path, prefix: str, out: Path) -> Path:
    """``prefix``-ed weights of a runner checkpoint (``backbone.`` of a segmentor, ``student.`` of a distiller)
    as a standalone JetViT checkpoint (``{'state_dict', 'meta'}``)."""
    state = {k[len(prefix):]: v for k, v in _runner_state(checkpoint).items() if k.startswith(prefix)}
    if not state:
        raise ValueError(f'{checkpoint} has no {prefix}* weights')
    return save(dict(state_dict=state, meta={}), out)  # the arch spec is in the state dict


def digest(*parts: object) -> str:
    """A short hash of files (their bytes) and values (their text): the key of a cached step."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.read_bytes() if isinstance(part, Path) else str(part).encode())
    return h.hexdigest()[:16]
