"""How contended the CPU was while a benchmark call ran: the machine may be shared, so every CPU sample records the
cores other processes used meanwhile, and the summary also gives the figures of the quiet samples alone."""
import os
import statistics
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

QUIET_CORES = 0.25  # a sample is "quiet" when other processes used less CPU than this while it ran


class CpuContention:
    """CPU time other processes used while a call ran, in cores (Linux /proc; None elsewhere): ``(busy CPU of the
    machine - this process's CPU) / wall time`` per sample, so every figure says how contended its shared machine was.
    Calls shorter than 20 clock ticks (0.2 s) get None: tick accounting cannot tell.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.available = enabled and Path('/proc/stat').is_file() and Path('/proc/self/stat').is_file()
        self.hz = os.sysconf('SC_CLK_TCK') if self.available else 100

    def snapshot(self) -> Optional[Tuple[float, int, int]]:
        if not self.available:
            return None
        with open('/proc/stat') as f:
            user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in f.readline().split()[1:8])
        with open('/proc/self/stat') as f:
            own = f.read().rsplit(')', 1)[1].split()
        return time.perf_counter(), user + nice + system + irq + softirq, int(own[11]) + int(own[12])

    def others_cores(self, before: Optional[tuple], after: Optional[tuple]) -> Optional[float]:
        if before is None or after is None or after[0] - before[0] < 20 / self.hz:
            return None  # unknown, or too short for the kernel's tick-based CPU accounting
        busy, own = after[1] - before[1], after[2] - before[2]
        return max(0., (busy - own) / self.hz / (after[0] - before[0]))


def quiet_stats(samples: List[float], others: List[Optional[float]]) -> Dict[str, object]:
    """Median/min over the samples taken while other processes used < QUIET_CORES of CPU."""
    quiet = [ms for ms, o in zip(samples, others) if o is not None and o < QUIET_CORES]
    known = [o for o in others if o is not None]
    return {'others_cores': others, 'others_cores_mean': statistics.mean(known) if known else None,
            'quiet_samples': len(quiet), 'quiet_median_ms': statistics.median(quiet) if quiet else None,
            'quiet_min_ms': min(quiet) if quiet else None}
