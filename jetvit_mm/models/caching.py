"""What a forward keeps for later forwards (block masks, index tensors, RoPE tables) is built as plain tensors.

A tensor made under ``torch.inference_mode`` is an inference tensor: autograd refuses to save it for backward, so a
cache filled during an inference-mode forward (mmengine's validation loop, a benchmark) and read later in training
breaks the backward ("Inference tensors cannot be saved for backward"; on the H200 it turned FlexAttention's backward
off for the whole process). Built under :func:`plain_tensors`, a cached tensor is neither an inference tensor nor part
of the first caller's autograd graph, whatever mode that caller was in.
"""
import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def plain_tensors() -> Iterator[None]:
    """Tensors made inside are ordinary tensors without autograd history, even inside ``torch.inference_mode``."""
    with torch.inference_mode(False), torch.no_grad():
        yield
