"""Host-allocator policy for CPU timing.

glibc's malloc serves blocks above its mmap threshold (at most 32 MiB once it has adapted) with a fresh ``mmap``
and hands them back with ``munmap`` on free. A ViT-B forward at 1024x2048 allocates 25 MiB token tensors and
100 MiB MLP hidden tensors, so every forward maps them again and the kernel zero-fills each page on first touch:
about 1.2 million page faults per forward on the project's VM (~1 s of an 8 s all-L forward; at 512x1024 most
blocks stay under the threshold and are recycled). Their cost depends on the VM's memory state, so it moved
whole-model timings by up to ~15 % between otherwise idle runs.

:func:`keep_freed_memory` makes malloc keep freed blocks for reuse (no per-forward mmap, no trimming), which is
what a CPU deployment gets from jemalloc / tcmalloc (PyTorch's CPU performance guide recommends one of them). It
is process-wide and cannot be undone, so call it in a process that only benchmarks.
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
