"""onnxruntime sessions of the benchmarked models, timed beside torch in the same interleaved run
(``tools/benchmark.py models --onnxruntime [dynamic|fixed]``): each model is exported once (dynamic batch and grid,
:func:`jetvit_mm.deploy.export_onnx`) and run by a CPU session at every benchmarked size, or (``fixed``) exported once
per size and batch (static shapes), its W layers keeping their windows and its squeeze convs one grouped conv."""
import tempfile
from pathlib import Path
from typing import Callable, Dict, Sequence, Tuple

import torch
from torch import nn

from jetvit_mm.deploy import ExportModule, export_onnx, onnx_session

from .profile import backbone_of

ORT_SUFFIX = ' (onnxruntime)'


def onnx_calls(models: Dict[str, nn.Module], sizes: Sequence[Tuple[int, int]], batch: int, threads: int,
               device: torch.device, dtype: torch.dtype, fixed: bool = False) -> Dict[str, Callable[[], object]]:
    """``{'<H>x<W> <label> (onnxruntime)': call}`` for every model and size (fp32 on the CPU only); ``fixed``: one
    export per size at ``batch`` (:func:`~jetvit_mm.deploy.export_onnx`'s ``fixed_size``)."""
    if device.type != 'cpu' or dtype != torch.float32:
        raise ValueError('--onnxruntime times onnxruntime\'s CPU session in fp32: use --device cpu --dtype fp32')
    calls = {}
    # the exports are read into the sessions when they are built, so their folder goes once all are built
    with tempfile.TemporaryDirectory(prefix='jetvit_onnx_') as scratch:
        folder = Path(scratch)
        for label, model in models.items():
            patch = backbone_of(model).patch_size
            sessions = {}
            for h, w in (sizes if fixed else sizes[:1]):
                path = export_onnx(ExportModule(model), folder / f'{len(calls)}_{h}x{w}.onnx', patch,
                                   fixed_size=(h, w) if fixed else None, batch=batch)
                sessions[(h, w)] = onnx_session(path, threads or None)
            for h, w in sizes:
                session = sessions[(h, w) if fixed else sizes[0]]
                feed = {session.get_inputs()[0].name: torch.randn(batch, 3, h, w).numpy()}
                calls[f'{h}x{w} {label}{ORT_SUFFIX}'] = (lambda s=session, f=feed: s.run(None, f))
    return calls
