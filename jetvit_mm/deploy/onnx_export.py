"""ONNX export of a JetViT with or without its head, dynamic in batch, height and width (multiples of the patch).

The export uses ``torch.onnx.export(dynamo=True)`` (``torch.export``): under it the model takes its export
formulations (:mod:`jetvit_mm.models.tracing`): RoPE and DINOv2 position embeddings from the symbolic grid, the
squeeze conv as shifted products, W as masked full attention. The TorchScript exporter is refused by the model.
onnx, onnxscript and onnxruntime are the optional ``deploy`` extra (``pip install -e .[deploy]``).
"""
from pathlib import Path
from typing import Optional, Sequence, Tuple, Union

import torch
from torch import nn

INPUT_NAME = 'image'
MAX_GRID = 512  # the largest grid side the exported graph accepts (patches)


class ExportModule(nn.Module):
    """``backbone`` (its tuple of feature maps) followed by ``head`` (a decode head, a depth head or a neck called
    on that tuple) when given: an image batch in, a tuple of tensors out."""

    def __init__(self, backbone: nn.Module, head: Optional[nn.Module] = None) -> None:
        super().__init__()
        self.backbone, self.head = backbone, head

    def forward(self, image: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        feats = self.backbone(image)
        out = feats if self.head is None else self.head(feats)
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)


def _requirement(name: str):
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ImportError(f'ONNX export needs {name}: pip install -e .[deploy] (onnx, onnxscript, onnxruntime)'
                          ) from error


def export_onnx(module: nn.Module, path: Union[str, Path], patch_size: int, sample_grid: Tuple[int, int] = (5, 7),
                sample_batch: int = 2, opset: int = 18) -> Path:
    """Write ``module`` (eval mode, fp32) to ``path`` with dynamic batch and a dynamic grid of ``patch_size``
    patches; the sample input (``sample_batch`` images of ``sample_grid`` patches) only drives the trace."""
    _requirement('onnxscript')
    module = module.eval()
    h, w = sample_grid
    sample = torch.randn(sample_batch, 3, h * patch_size, w * patch_size)
    batch = torch.export.Dim('batch', min=1, max=1024)
    rows, cols = torch.export.Dim('rows', min=1, max=MAX_GRID), torch.export.Dim('cols', min=1, max=MAX_GRID)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        with torch.inference_mode(False):
            outputs = module(sample)
        names = [f'output{i}' for i in range(len(outputs))]
        program = torch.onnx.export(module, (sample,), dynamo=True, input_names=[INPUT_NAME], output_names=names,
                                    dynamic_shapes={'image': {0: batch, 2: patch_size * rows, 3: patch_size * cols}},
                                    opset_version=opset, external_data=False, verbose=False)
    program.save(str(path))
    return path


def onnx_session(path: Union[str, Path], threads: Optional[int] = None):
    """An onnxruntime CPU session of ``path``."""
    ort = _requirement('onnxruntime')
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=['CPUExecutionProvider'])


def run_onnx(session, image: torch.Tensor) -> Sequence[torch.Tensor]:
    """The session's outputs for ``image`` (``[B, 3, H, W]`` fp32), as tensors."""
    return [torch.from_numpy(out) for out in session.run(None, {INPUT_NAME: image.float().numpy()})]
