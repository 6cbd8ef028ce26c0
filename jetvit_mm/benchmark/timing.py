"""The one timer of the project: the benchmarks, the search's latency table and the demo's latency table use it.

Entries are timed in interleaved rounds: every round calls each entry once, the first entry rotating from round to
round, so a slow drift of a shared machine hits every entry alike and no entry always runs right after the same
other one. The first ``warmup`` rounds are dropped. With ``min_total_ms`` an entry stays in the rounds until its
samples also add up to that much time (at most ``max_repeat`` samples): fast calls then get more samples, which a
minimum needs on a shared machine. On CUDA each call is synchronised and timed with CUDA events; :func:`cuda_graphed`
captures a call in a CUDA graph, so its replay is timed without the host's kernel-launch cost.

The host allocator's policy (``--malloc``) is process-wide and set once before timing:
:mod:`jetvit_mm.benchmark.allocator`.
"""
import statistics
import time
from typing import Callable, Dict, List, Mapping, Optional, Union

import torch

Call = Callable[[], object]
CallTimer = Callable[[Call], float]


def call_timer(device: Union[str, torch.device]) -> CallTimer:
    """Milliseconds of one call: CUDA events after a synchronise, synchronised again (GPU); perf_counter (CPU)."""
    device = torch.device(device)
    if device.type == 'cuda':
        def cuda_timer(fn: Call) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            return start.elapsed_time(end)
        return cuda_timer

    def cpu_timer(fn: Call) -> float:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    return cpu_timer


def time_interleaved(calls: Mapping[str, Call], warmup: int, repeat: int, device: Union[str, torch.device] = 'cpu', *,
                     min_total_ms: float = 0., max_repeat: Optional[int] = None, timer: Optional[CallTimer] = None,
                     on_round: Optional[Callable[[int, bool], None]] = None) -> Dict[str, List[float]]:
    """Milliseconds of every timed call per entry (warm-up rounds dropped), in interleaved rounds.

    An entry is done once it has ``repeat`` samples adding up to at least ``min_total_ms`` (or ``max_repeat``
    samples); the rounds go on while an entry is not done. ``timer`` times one call (default: :func:`call_timer` of
    ``device``); ``on_round(rounds_done, warming_up)`` is called after every round.
    """
    if warmup < 0 or repeat < 1:
        raise ValueError(f'warmup must be >= 0 and repeat >= 1, got warmup={warmup}, repeat={repeat}')
    if max_repeat is not None and max_repeat < repeat:
        raise ValueError(f'max_repeat ({max_repeat}) must be >= repeat ({repeat})')
    if min_total_ms > 0 and max_repeat is None:
        raise ValueError('min_total_ms needs max_repeat (a bound on the samples of a call that takes no time)')
    if not calls:
        raise ValueError('nothing to time: no calls given')
    timer = timer or call_timer(device)
    samples: Dict[str, List[float]] = {name: [] for name in calls}

    def done(name: str) -> bool:
        s = samples[name]
        return len(s) >= repeat and (sum(s) >= min_total_ms or (max_repeat is not None and len(s) >= max_repeat))

    r = 0
    while r < warmup or not all(done(name) for name in calls):
        active = [name for name in calls if r < warmup or not done(name)]
        shift = r % len(active)
        for name in active[shift:] + active[:shift]:
            ms = timer(calls[name])
            if r >= warmup:
                samples[name].append(ms)
        r += 1
        if on_round is not None:
            on_round(r, r <= warmup)
    return samples


def summarize(samples: Mapping[str, List[float]]) -> Dict[str, Dict[str, float]]:
    """Median, minimum and maximum (ms) per entry."""
    return {name: {'median_ms': statistics.median(s), 'min_ms': min(s), 'max_ms': max(s)}
            for name, s in samples.items()}


def cuda_graphed(fn: Call) -> Call:
    """``fn`` (fixed inputs, called under inference mode) captured in a CUDA graph; the returned call replays it."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # warm-up outside the graph (cuBLAS / cuDNN handles, lazy allocations)
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay() -> object:
        graph.replay()
        return out
    replay.graph = graph  # keep the graph (and its memory pool) alive as long as the call
    return replay


def maybe_graphed(calls: Mapping[str, Call], enabled: bool) -> Dict[str, Call]:
    """``calls`` captured as CUDA graphs when ``enabled`` (call under inference mode), else unchanged."""
    return {name: cuda_graphed(fn) for name, fn in calls.items()} if enabled else dict(calls)
