"""A pure mixer core compiled once per shape: ``torch.compile(fn, dynamic=False)``, created on first use."""
import functools
from typing import Callable


@functools.cache
def compiled(fn: Callable) -> Callable:
    """``fn`` compiled by torch.compile (inductor), without dynamic shapes: one specialised kernel set per input
    shape and option set. Beyond torch._dynamo's recompile limit (8 per function) torch runs ``fn`` uncompiled, with
    its own warning."""
    import torch

    return torch.compile(fn, dynamic=False)
