"""Latency model: one block per mixer letter timed once on the target device and size; an arch's predicted
latency is the shared part (embedding + final norm) plus the sum of its blocks."""
import copy
import json
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from jetvit_mm.benchmark.timing import time_interleaved
from jetvit_mm.jsonio import read_json_file
from jetvit_mm.models.jetvit import JetBlock, JetViT
from jetvit_mm.models.mixers import MIXERS

from .state import write_json_atomic


def latency_calls(model: JetViT, x: torch.Tensor) -> Dict[str, Callable[[], torch.Tensor]]:
    """What a latency table times on input ``x``: the shared part (``base``: patch embedding + final norm) and, per
    letter the model declares, one block (the model's first block with that mixer in it)."""
    tokens, grid, rope = model.prepare_tokens(x)
    calls = {'base': lambda: model.norm(model.prepare_tokens(x)[0])}
    ref = model.blocks[0]
    for letter in sorted(model.mixer_table.letters):
        mixer = model.mixer_table.build(letter, **model.mixer_args).to(x.device, x.dtype).eval()
        block = JetBlock(ref.norm1, mixer, ref.ls1, nn.Identity(), ref.norm2, ref.mlp, ref.ls2, nn.Identity())
        calls[letter] = lambda b=block: b(tokens, grid, rope)
    return calls


@torch.inference_mode()
def measure_latency_samples(model: JetViT, size: Tuple[int, int], device: str = 'cpu',
                            dtype: torch.dtype = torch.float32, warmup: int = 2, repeat: int = 5,
                            min_total_ms: float = 200., max_repeat: int = 500) -> Dict[str, List[float]]:
    """Milliseconds of every timed run of :func:`latency_calls` at ``size``, batch 1, in interleaved rounds
    (:func:`jetvit_mm.benchmark.timing.time_interleaved`): at least ``repeat`` runs per key, more for fast calls
    until they add up to ``min_total_ms``."""
    dev = torch.device(device)
    first = next(model.parameters())
    if first.dtype != dtype or first.device.type != dev.type or dev.index not in (None, first.device.index):
        # time a copy: the caller's model stays where it is
        model = copy.deepcopy(model).to(dev, dtype)
    model = model.eval()
    x = torch.randn(1, 3, *size, device=dev, dtype=dtype)
    return time_interleaved(latency_calls(model, x), warmup, repeat, dev, min_total_ms=min_total_ms,
                            max_repeat=max_repeat)


def measure_latency_table(model: JetViT, size: Tuple[int, int], device: str = 'cpu', dtype: torch.dtype = torch.float32,
                          warmup: int = 2, repeat: int = 5) -> Dict[str, float]:
    """Milliseconds for one block of each mixer letter and for the shared part, batch 1, at ``size``: the minimum
    of :func:`measure_latency_samples` (on a shared machine the minimum is the call's own cost, while medians of
    short calls pick up scheduler stalls)."""
    samples = measure_latency_samples(model, size, device, dtype, warmup, repeat)
    return {key: min(times) for key, times in samples.items()}


def read_latency_table(path: Path, letters: Optional[str] = None) -> Tuple[Dict[str, float], Optional[list]]:
    """``(table, size)`` from a JSON file: a search's ``latency_table.json`` (``{"key": {...}, "table": {...}}``)
    or a bare ``{"base": ms, "F": ms, "L": ms, "W": ms}`` (``size`` None then), with an entry for each of
    ``letters`` (a model's declared letters; default L, W, F). For costing archs with a table measured on the
    deployment device and size while searching elsewhere."""
    saved = read_json_file(path, 'a latency table (a search\'s latency_table.json, or {"base", "F", "L", "W"} in ms)')
    table = saved.get('table', saved) if isinstance(saved, dict) else None
    needed = ['base', *sorted(MIXERS if letters is None else set(letters))]
    if not isinstance(table, dict) or any(not isinstance(table.get(k), (int, float)) or table[k] < 0 for k in needed):
        raise ValueError(f'{path}: a latency table needs non-negative milliseconds for {", ".join(needed)} '
                         f'(optionally under "table"), got {saved!r}')
    size = saved.get('key', {}).get('size') if 'table' in saved else None
    return {k: float(table[k]) for k in needed}, size


def predict_latency(arch: str, table: Dict[str, float]) -> float:
    missing = sorted(set(arch) - set(table))
    if missing:
        raise ValueError(f'the latency table has no entry for letter(s) {missing} of arch {arch!r}; it has '
                         f'{sorted(k for k in table if k != "base")}: measure it with the model that declares them')
    return table['base'] + sum(table[letter] for letter in arch)


def load_or_measure(cache: Path, model: JetViT, size: Tuple[int, int], device: str = 'cpu',
                    key: Optional[dict] = None) -> Dict[str, float]:
    """The latency table from ``cache`` if it was measured for the same model, size and device; else measure it."""
    key = dict(key or {}, size=list(size), device=device, model=model.model_name, embed_dim=model.embed_dim,
               mixers=json.dumps(model.mixer_table.spec_entries(model.mixer_table.letters), sort_keys=True))
    if cache.is_file():
        try:
            saved = read_json_file(cache, 'a latency table cache', keys=('key', 'table'))
        except ValueError:  # a damaged cache is measured again and rewritten
            saved = {}
        if saved.get('key') == key:
            return saved['table']
    table = measure_latency_table(model, size, device)
    write_json_atomic(cache, dict(key=key, table=table))  # a kill while writing leaves no broken cache
    return table
