"""The one table of floating-point dtypes a user may name, in the short (``fp32``, the benchmark's flags) and the
long spelling (``float32``, torch's and the FSDP2 wrapper's config keys)."""
from typing import Dict, Tuple

import torch

SHORT = {'fp32': torch.float32, 'bf16': torch.bfloat16, 'fp16': torch.float16}
LONG = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}
DTYPES: Dict[str, torch.dtype] = {**SHORT, **LONG}


def to_dtype(name: str, what: str = 'dtype', valid: Tuple[str, ...] = tuple(DTYPES)) -> torch.dtype:
    """The torch dtype named ``name`` (either spelling); an unknown name (or one outside ``valid``) is refused,
    naming ``what`` it was given for and the valid names."""
    if name not in DTYPES or name not in valid:
        raise ValueError(f'unknown {what} {name!r}; valid: {", ".join(valid)}')
    return DTYPES[name]


def dtype_bytes(name: str, what: str = 'dtype') -> int:
    """Bytes per element of the dtype named ``name``."""
    return to_dtype(name, what).itemsize


__all__ = ['DTYPES', 'LONG', 'SHORT', 'dtype_bytes', 'to_dtype']
