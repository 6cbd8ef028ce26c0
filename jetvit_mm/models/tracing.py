"""Whether the model is being traced for deployment, and which exporter traces it.

Under ``torch.export`` the patch grid is symbolic: the model then takes formulations that work on symbolic sizes and
compute the same values as its eager forward (docs/deploy.md). The TorchScript-based exporter turns the grid into
constants, so it is refused with an error naming the one that works.
"""
import contextlib
from typing import Iterator

import torch

from jetvit_mm.process_state import set_switch, switch

LEGACY_EXPORT_ERROR = (
    'the TorchScript-based ONNX exporter (torch.onnx.export(..., dynamo=False)) cannot export a JetViT: it records the '
    'patch grid as constants (RoPE, position embeddings and windows would only be right at the export size) and it '
    'mistranslates the W layers\' window copies (wrong values even at the export size). Use torch.onnx.export(..., '
    'dynamo=True) with dynamic_shapes, or tools/export_onnx.py (dynamic batch, height and width)')


def exporting() -> bool:
    """True while ``torch.export`` traces the model, and only then: False under a plain ``torch.compile``. torch
    2.11's dynamo folds ``torch.compiler.is_exporting()`` to True under every ``torch.compile``, so the flag it
    returns, which torch.export sets before it traces, is read here where it exists."""
    flag = getattr(torch.compiler, '_is_exporting_flag', None)
    return torch.compiler.is_exporting() if flag is None else bool(flag)


def exporting_symbolic_grid() -> bool:
    """True while ``torch.export`` traces the model with a symbolic shape (any batch and input size); False under
    :func:`fixed_grid_export`."""
    return exporting() and not switch('fixed_grid')


@contextlib.contextmanager
def fixed_grid_export() -> Iterator[None]:
    """An export at one input shape (static batch, height and width): the W layers keep their windows and the
    squeeze conv is one grouped conv, as their counts are constants of the graph."""
    previous = set_switch('fixed_grid', True)
    try:
        yield
    finally:
        set_switch('fixed_grid', previous)


def check_not_legacy_onnx_export() -> None:
    """Raise RuntimeError under the TorchScript-based ONNX exporter (see :data:`LEGACY_EXPORT_ERROR`)."""
    if torch.onnx.is_in_onnx_export() and not exporting():
        raise RuntimeError(LEGACY_EXPORT_ERROR)
