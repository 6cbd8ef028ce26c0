"""A JetViT checkpoint cut out of a runner checkpoint (the pipeline's fine-tuned backbones, the demo's students)."""
from pathlib import Path

from .io import read, save


def extract_backbone(checkpoint: Path, prefix: str, out: Path) -> Path:
    """The ``prefix``-ed weights of a runner checkpoint (``backbone.`` of a segmentor, ``student.`` of a distiller)
    as a standalone JetViT checkpoint (``{'state_dict', 'meta'}``; the arch spec travels in the state dict)."""
    raw = read(checkpoint).raw
    state = {k[len(prefix):]: v for k, v in raw.get('state_dict', raw).items() if k.startswith(prefix)}
    if not state:
        raise ValueError(f'{checkpoint} has no {prefix}* weights')
    return save(dict(state_dict=state, meta={}), out)
