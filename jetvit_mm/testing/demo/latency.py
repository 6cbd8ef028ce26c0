"""The demo's latency table: one block of each mixer of DINOv3-B at 1024x2048 on this machine, timed with the
project's timer and cached in the work dir."""
import json
import os
import statistics
import time
from pathlib import Path
from typing import Dict, Tuple

import torch

from jetvit_mm.benchmark.allocator import apply_policy
from jetvit_mm.models import JetViT
from jetvit_mm.search.latency import measure_latency_samples

from .checkpoints import digest
from .paths import REPO

LATENCY_MODEL = 'dinov3_vitb16'
LATENCY_SIZE = (1024, 2048)


def measure_interleaved(model_name: str, size: Tuple[int, int], repeat: int,
                        warmup: int = 1) -> Dict[str, Dict[str, float]]:
    """Milliseconds of one block of each mixer (F, L, W) and of the shared part (patch embedding + final norm) of
    ``model_name`` at ``size``, batch 1, fp32: ``jetvit_mm.search.latency``'s calls in interleaved rounds (the
    start rotating), so that a change of the machine's load during the measurement hits every mixer alike.
    Returns per key the median and the min and max of the rounds."""
    torch.manual_seed(0)
    model = JetViT(model_name, depth=1).eval()  # one block is timed per mixer; the rest is shared
    times = measure_latency_samples(model, size, warmup=warmup, repeat=repeat, min_total_ms=0.)
    return {k: dict(median=statistics.median(v), min=min(v), max=max(v)) for k, v in times.items()}


def latency_table(cache: Path, threads: int, repeat: int) -> Dict[str, float]:
    """Per-mixer block latency (ms) of DINOv3-B at 1024x2048, batch 1, on this machine; cached in ``cache``."""
    # the code that is timed is part of the key: a table measured with older mixers is measured again
    timed_code = digest(*sorted((REPO / 'jetvit_mm' / 'models').rglob('*.py')))
    # as tools/benchmark.py: freed tensors stay in the heap (no page faults from mapping the big ones again every
    # call); process-wide, harmless here: this is the demo's last step
    kept = apply_policy('keep', 'cpu')
    key = dict(model=LATENCY_MODEL, size=list(LATENCY_SIZE), threads=threads, repeat=repeat,
               timing='interleaved-rotating', torch=torch.__version__, cpus=os.cpu_count(), code=timed_code,
               malloc='keep' if kept else 'system')
    if cache.is_file():
        saved = json.loads(cache.read_text())
        if saved.get('key') == key:
            return saved['table']
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    load = os.getloadavg()
    try:
        rounds = measure_interleaved(LATENCY_MODEL, LATENCY_SIZE, repeat)
    finally:
        torch.set_num_threads(previous)
    table = {k: v['median'] for k, v in rounds.items()}
    cache.write_text(json.dumps(dict(key=key, table=table, rounds=rounds, measured=time.strftime('%Y-%m-%d %H:%M:%S'),
                                     loadavg_before=load, loadavg_after=os.getloadavg()), indent=2))
    return table
