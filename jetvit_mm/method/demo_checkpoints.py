"""The demo's checkpoint plumbing: a JetViT checkpoint cut out of a runner checkpoint, and the digests its caches are
keyed by."""
import hashlib
from pathlib import Path

from jetvit_mm.models.checkpoint import read, save


def extract_backbone(checkpoint: Path, prefix: str, out: Path) -> Path:
    """``prefix``-ed weights of a runner checkpoint (``backbone.`` of a segmentor, ``student.`` of a distiller)
    as a standalone JetViT checkpoint (``{'state_dict', 'meta'}``; the arch spec is in the state dict)."""
    return save(dict(state_dict=read(checkpoint, prefix).state, meta={}), out)


def digest(*parts: object) -> str:
    """A short hash of files (their bytes) and values (their text): the key of a cached step."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.read_bytes() if isinstance(part, Path) else str(part).encode())
    return h.hexdigest()[:16]
