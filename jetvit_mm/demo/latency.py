"""The demo's latency table: one block of each mixer of DINOv3-B at 1024x2048 on this machine, timed with the
project's timer and cached in the work dir; with the alternatives' parts: an F block on the token clusters, the
clustering and the reconstruction (the token-clustering baseline) and the smaller teacher's base and F block."""
import json
import os
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch

from jetvit_mm.benchmark.allocator import apply_policy
from jetvit_mm.benchmark.timing import time_interleaved
from jetvit_mm.fingerprints import content_digest
from jetvit_mm.models import JetViT
from jetvit_mm.models.token_reduction import Clustering, ClusterSpec, cluster_rope, cluster_tokens, reconstruct
from jetvit_mm.search.latency import latency_calls

REPO = Path(__file__).resolve().parents[2]

LATENCY_MODEL = 'dinov3_vitb16'
LATENCY_SIZE = (1024, 2048)
# the smaller teacher of the demo is the toy teacher at half its width; at DINOv3 scale that is DINOv3-S (384 wide,
# 6 heads, 12 layers: half of DINOv3-B's 768 / 12)
SMALL_MODEL = 'dinov3_vits16'
SMALL_PREFIX = 'small '


def clustering_calls(model: JetViT, size: Tuple[int, int], factor: int, iters: int,
                     temperature: float) -> Dict[str, Callable[[], object]]:
    """The token-clustering baseline's own parts at ``size``: an F block on the clusters (``F@f<factor>``), the
    clustering with the clusters' RoPE (``cluster f<factor>``) and one reconstruction (``reconstruct f<factor>``)."""
    H, W = size[0] // model.patch_size, size[1] // model.patch_size
    x = torch.randn(1, 3, -(-H // factor) * model.patch_size, -(-W // factor) * model.patch_size)
    calls = {f'F@f{factor}': latency_calls(model, x)['F']}
    tokens = torch.randn(1, H * W, model.embed_dim)

    def cluster():
        return cluster_tokens(tokens, (H, W), factor, iters, temperature), cluster_rope(model.rope, (H, W), factor,
                                                                                           tokens)
    (centres, assignment, cgrid), rope = cluster()
    state = Clustering(assignment, centres, tokens, (H, W), cgrid, factor, rope)
    calls[f'cluster f{factor}'] = cluster
    calls[f'reconstruct f{factor}'] = lambda: reconstruct(state, centres.flatten(1, 2) + 1.)
    return calls


def measure_interleaved(model_name: str, size: Tuple[int, int], repeat: int, warmup: int = 1,
                        clusterings: Sequence[ClusterSpec] = (),
                        small_model: Optional[str] = None) -> Dict[str, Dict[str, float]]:
    """Milliseconds of one block of each mixer (F, L, W) and of the shared part of ``model_name`` at ``size``, batch
    1, fp32, in interleaved rounds; in the same rounds the parts of each of ``clusterings`` and ``small_model``'s
    base and F block (keys prefixed ``'small '``). Returns per key the median and the min and max of the rounds."""
    torch.manual_seed(0)
    model = JetViT(model_name, depth=1).eval()  # one block is timed per mixer; the rest is shared
    small = JetViT(small_model, depth=1).eval() if small_model else None  # built outside inference mode (checks)
    with torch.inference_mode():
        x = torch.randn(1, 3, *size)
        calls = dict(latency_calls(model, x))
        for spec in clusterings:
            calls.update(clustering_calls(model, size, spec.factor, spec.iters, spec.temperature))
        if small is not None:
            calls.update({SMALL_PREFIX + k: v for k, v in latency_calls(small, x).items() if k in ('base', 'F')})
        times = time_interleaved(calls, warmup, repeat, 'cpu')
    return {k: dict(median=statistics.median(v), min=min(v), max=max(v)) for k, v in times.items()}


def clustering_latency(spec: ClusterSpec, table: Dict[str, float], depth: int) -> float:
    """Predicted ms of the teacher with ``spec``'s clustering, its last layer read by the head: base, the blocks up
    to ``after`` and after ``until`` at full resolution, the others on the clusters, one clustering and one
    reconstruction."""
    until = spec.resolved_until(depth)
    f = spec.factor
    return (table['base'] + table['F'] * (spec.after + 1 + depth - 1 - until) + table[f'F@f{f}'] * (until - spec.after)
            + table[f'cluster f{f}'] + table[f'reconstruct f{f}'])


def small_teacher_latency(table: Dict[str, float], depth: int) -> float:
    """Predicted ms of the smaller teacher (all F, its own shapes)."""
    return table[SMALL_PREFIX + 'base'] + depth * table[SMALL_PREFIX + 'F']


def latency_table(cache: Path, threads: int, repeat: int, clusterings: Sequence[ClusterSpec] = (),
                  small_model: Optional[str] = None) -> Dict[str, float]:
    """Per-mixer block latency (ms) of DINOv3-B at 1024x2048, batch 1, on this machine, with the parts of
    ``clusterings`` and ``small_model`` (:func:`measure_interleaved`); cached in ``cache``."""
    # the code that is timed is part of the key: a table measured with older mixers is measured again
    timed_code = content_digest(*sorted((REPO / 'jetvit_mm' / 'models').rglob('*.py')))
    # as tools/benchmark.py: freed tensors stay in the heap (no page faults from mapping the big ones again every
    # call); process-wide, harmless here: this is the demo's last step
    kept = apply_policy('keep', 'cpu')
    key = dict(model=LATENCY_MODEL, size=list(LATENCY_SIZE), threads=threads, repeat=repeat,
               timing='interleaved-rotating', torch=torch.__version__, cpus=os.cpu_count(), code=timed_code,
               malloc='keep' if kept else 'system',
               clusterings=[list(c) for c in sorted({(c.factor, c.iters, c.temperature) for c in clusterings})],
               small=small_model)
    if cache.is_file():
        saved = json.loads(cache.read_text())
        if saved.get('key') == key:
            return saved['table']
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    load = os.getloadavg()
    try:
        rounds = measure_interleaved(LATENCY_MODEL, LATENCY_SIZE, repeat, clusterings=clusterings,
                                     small_model=small_model)
    finally:
        torch.set_num_threads(previous)
    table = {k: v['median'] for k, v in rounds.items()}
    cache.write_text(json.dumps(dict(key=key, table=table, rounds=rounds, measured=time.strftime('%Y-%m-%d %H:%M:%S'),
                                     loadavg_before=load, loadavg_after=os.getloadavg()), indent=2))
    return table
