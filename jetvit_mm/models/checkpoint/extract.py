"""A JetViT checkpoint cut out of a runner checkpoint (the pipeline's fine-tuned backbones, the demo's students)."""
from pathlib import Path

from .io import read, save


def extract_backbone(checkpoint: Path, prefix: str, out: Path) -> Path:
    """The ``prefix``-ed weights of a runner checkpoint (``backbone.`` of a segmentor, ``student.`` of a distiller)
    as a standalone JetViT checkpoint (``{'state_dict', 'meta'}``; the arch spec travels in the state dict)."""
    return save(dict(state_dict=read(checkpoint, prefix).state, meta={}), out)
