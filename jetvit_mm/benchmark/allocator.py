"""Host-allocator policy for CPU timing.

glibc's malloc serves blocks above its mmap threshold (at most 32 MiB once adapted) with a fresh ``mmap`` and
``munmap``s them on free. A ViT-B forward at 1024x2048 allocates 25 MiB token and 100 MiB MLP hidden tensors, so each
forward maps them again and the kernel zero-fills every page on first touch: ~1.2 million page faults (~1 s of an 8 s
all-L forward on the project's VM), a cost that follows the VM's memory state and moved whole-model timings by up to
~15 % between idle runs. :func:`keep_freed_memory` makes malloc keep freed blocks for reuse, what a CPU deployment
gets from jemalloc / tcmalloc (PyTorch's CPU performance guide recommends one). It is process-wide and cannot be
undone: call it in a process that only benchmarks.
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
    """Raise glibc's mmap and trim thresholds so freed tensors stay in the heap for the next forward.

    Returns whether it took effect: False off glibc (musl, macOS, Windows), where the system policy stays.
    """
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
