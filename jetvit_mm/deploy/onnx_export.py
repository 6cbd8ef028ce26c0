"""ONNX export of a JetViT with or without its head, dynamic in batch, height and width (multiples of the patch).

The export formulations and the ``fixed_size`` deployment export: docs/deploy.md. onnx, onnxscript and onnxruntime
are the optional ``deploy`` extra (``pip install -e .[deploy]``).
"""
import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional, Sequence, Tuple, Union

import torch
from torch import nn

from jetvit_mm.models.tracing import fixed_grid_export

INPUT_NAME = 'image'
MAX_GRID = 512  # the largest grid side the exported graph accepts (patches)
DEFAULT_OPSET = 20  # ONNX's own Gelu op (opset 20): onnxruntime runs it as one kernel, not five elementwise ops


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


def check_writable(path: Union[str, Path]) -> Path:
    """``path`` (absolute) when this process can write a file there, tried by creating one in a new folder beside it
    (in its nearest existing folder) and removing both: ``os.access`` trusts the permission bits, which root and
    some file systems ignore. ValueError naming ``path`` and the reason otherwise."""
    path = Path(path).expanduser().absolute()
    folder = path.parent
    try:
        if path.is_dir():
            raise ValueError(f'{path} is a folder; give the path of the file to write')
        while not folder.exists():
            folder = folder.parent
        if not folder.is_dir():
            raise ValueError(f'{path} cannot be written: {folder} is a file, not a folder')
        staging = Path(tempfile.mkdtemp(prefix=f'.{path.name[:64]}.', suffix='.tmp', dir=folder))
        try:
            (staging / path.name).open('xb').close()
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as error:
        raise ValueError(f'{path} cannot be written: {error.strerror or error} ({error.filename or folder})'
                         ) from None
    return path


def _save_atomically(program, path: Path) -> None:
    """``program.save`` into a new folder beside ``path``, then its files renamed into place, the .onnx last (a large
    model's external weights keep the file name the model refers to): no reader sees a partial .onnx, and a failed
    save leaves nothing behind."""
    staging = Path(tempfile.mkdtemp(prefix=f'.{path.name[:64]}.', suffix='.tmp', dir=path.parent))
    try:
        program.save(str(staging / path.name))
        for extra in sorted(staging.iterdir()):
            if extra.name != path.name:
                os.replace(extra, path.parent / extra.name)
        os.replace(staging / path.name, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def export_onnx(module: nn.Module, path: Union[str, Path], patch_size: int, sample_grid: Tuple[int, int] = (5, 7),
                sample_batch: int = 2, opset: int = DEFAULT_OPSET, fixed_size: Optional[Tuple[int, int]] = None,
                batch: int = 1) -> Path:
    """Write ``module`` (eval mode, fp32) to ``path`` with dynamic batch and a dynamic grid of ``patch_size``
    patches; the sample input (``sample_batch`` images of ``sample_grid`` patches) only drives the trace. With
    ``fixed_size`` (height, width in pixels) the graph takes ``batch`` images of that size only (the deployment
    export of a hybrid). ``path`` is tried before the export (:func:`check_writable`) and written atomically."""
    _requirement('onnxscript')
    path = check_writable(path)
    module = module.eval()
    if fixed_size is None:
        h, w = sample_grid
        sample = torch.randn(sample_batch, 3, h * patch_size, w * patch_size)
        rows, cols = torch.export.Dim('rows', min=1, max=MAX_GRID), torch.export.Dim('cols', min=1, max=MAX_GRID)
        dynamic = {'image': {0: torch.export.Dim('batch', min=1, max=1024), 2: patch_size * rows,
                             3: patch_size * cols}}
    else:
        if any(side % patch_size for side in fixed_size):
            raise ValueError(f'fixed_size {tuple(fixed_size)} must be multiples of the patch size {patch_size}')
        if batch < 1:
            raise ValueError(f'batch must be a positive number of images, got {batch}')
        sample, dynamic = torch.randn(batch, 3, *fixed_size), None  # every dimension static
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), (fixed_grid_export() if fixed_size is not None else contextlib.nullcontext()):
        with torch.inference_mode(False):
            outputs = module(sample)
        names = [f'output{i}' for i in range(len(outputs))]
        program = torch.onnx.export(module, (sample,), dynamo=True, input_names=[INPUT_NAME], output_names=names,
                                    dynamic_shapes=dynamic, opset_version=opset, external_data=False, verbose=False)
    _save_atomically(program, path)
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


def check_finite(outputs: Sequence[torch.Tensor], source: str, names: Optional[Sequence[str]] = None) -> None:
    """ValueError naming the first of ``outputs`` (of ``source``: torch, onnxruntime) that holds NaN or inf."""
    names = list(names or [f'output{i}' for i in range(len(outputs))])
    for name, out in zip(names, outputs):
        bad = int((~torch.isfinite(out)).sum())
        if bad:
            raise ValueError(f'{name}: the {source} output holds {bad} non-finite value(s) (NaN or inf) of '
                             f'{out.numel()}, shape {list(out.shape)}; a model with non-finite outputs cannot be '
                             f'checked (its weights or input hold them, or it overflows)')


def compare_outputs(got: Sequence[torch.Tensor], expected: Sequence[torch.Tensor],
                    names: Optional[Sequence[str]] = None) -> float:
    """The largest relative difference (``max |got - expected| / max |expected|``) over the outputs of onnxruntime
    (``got``) against torch's (``expected``); ValueError naming the output when either holds NaN or inf (a NaN
    difference passes every tolerance), or when they differ in number or shape."""
    names = list(names or [f'output{i}' for i in range(len(expected))])
    if len(got) != len(expected):
        raise ValueError(f'onnxruntime gives {len(got)} output(s), torch {len(expected)}')
    check_finite(expected, 'torch', names)
    check_finite(got, 'onnxruntime', names)
    worst = 0.
    for name, g, e in zip(names, got, expected):
        if g.shape != e.shape:
            raise ValueError(f'{name}: onnxruntime gives shape {list(g.shape)}, torch {list(e.shape)}')
        if e.numel():
            worst = max(worst, float((g.float() - e.float()).abs().max() / e.float().abs().max().clamp(min=1e-12)))
    return worst
