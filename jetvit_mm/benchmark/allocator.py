"""Host-allocator policy for CPU timing.

glibc's malloc serves blocks above its mmap threshold with a fresh ``mmap`` and ``munmap``s them on free, so each
1024x2048 forward page-faults its large tensors in afresh (docs/benchmarks.md). :func:`keep_freed_memory` makes
malloc keep freed blocks for reuse, what a CPU deployment gets from jemalloc / tcmalloc. It is process-wide and
cannot be undone: call it in a process that only benchmarks.
"""
import ctypes
import ctypes.util
import platform

# mallopt(3) parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# mallopt takes an int: the largest threshold it accepts, far above any single tensor of these benchmarks
KEEP_THRESHOLD = 2 ** 31 - 1

POLICIES = ('keep', 'system')


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds so freed tensors stay in the heap for the next forward; whether it took
    effect (False off glibc, where the system policy stays)."""
    if platform.system() != 'Linux' or platform.libc_ver()[0] != 'glibc':
        return False
    libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6')
    return bool(libc.mallopt(M_MMAP_THRESHOLD, KEEP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD,
                                                                                     KEEP_THRESHOLD))


def apply_policy(policy: str, device_type: str) -> bool:
    """``policy`` ('keep' or 'system') for a CPU benchmark; True when 'keep' took effect. CUDA timings keep the
    system policy (host allocations are not on their critical path)."""
    if policy not in POLICIES:
        raise ValueError(f'unknown allocator policy {policy!r}; choose one of {", ".join(POLICIES)}')
    return policy == 'keep' and device_type == 'cpu' and keep_freed_memory()
