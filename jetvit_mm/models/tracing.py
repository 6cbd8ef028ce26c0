"""Whether the model is being traced for deployment, and which exporter traces it.

Under ``torch.export`` (what ``torch.onnx.export(dynamo=True)`` runs) the patch grid is symbolic: the model then
takes formulations that work on symbolic sizes and compute the same values as its eager forward (RoPE and DINOv2
position embeddings built from the grid with tensor ops, the squeeze conv as a sum of shifted products, windows
padded and masked whatever the grid). The TorchScript-based exporter (``dynamo=False``) turns the grid into
constants, so it is refused with an error naming the one that works.
"""
import torch

LEGACY_EXPORT_ERROR = (
    'the TorchScript-based ONNX exporter (torch.onnx.export(..., dynamo=False)) cannot export a JetViT: it records the '
    'patch grid as constants (RoPE, position embeddings and windows would only be right at the export size) and it '
    'mistranslates the W layers\' window copies (wrong values even at the export size). Use torch.onnx.export(..., '
    'dynamo=True) with dynamic_shapes, or tools/export_onnx.py (dynamic batch, height and width)')


def exporting() -> bool:
    """True while ``torch.export`` traces the model (also under ``torch.onnx.export(dynamo=True)``)."""
    return torch.compiler.is_exporting()


def check_not_legacy_onnx_export() -> None:
    """Raise RuntimeError under the TorchScript-based ONNX exporter (see :data:`LEGACY_EXPORT_ERROR`)."""
    if torch.onnx.is_in_onnx_export() and not torch.compiler.is_exporting():
        raise RuntimeError(LEGACY_EXPORT_ERROR)
