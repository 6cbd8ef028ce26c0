"""The host side of a benchmark run: torch threads and the allocator policy set before timing, and the record of the
machine, date and policy written with every result."""
import datetime
import os
import platform
import subprocess
from pathlib import Path
from typing import Dict, Optional

import torch

from .allocator import apply_policy


def prepare_host(threads: int, malloc: str, device_type: str) -> bool:
    """Set torch's CPU threads (0: torch's default) and the allocator ``malloc`` policy; True when 'keep' took
    effect (:func:`jetvit_mm.benchmark.allocator.apply_policy`)."""
    if threads:
        torch.set_num_threads(threads)
    return apply_policy(malloc, device_type)


def started_at() -> str:
    """The local time a run started, ISO format with the UTC offset."""
    return datetime.datetime.now().astimezone().isoformat(timespec='seconds')


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what ``platform`` knows."""
    try:
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def bf16_units() -> list:
    """The CPU's bf16 matrix units (AMX / AVX512-BF16), which decide what bf16 figures on a CPU mean."""
    try:
        flags = next(line for line in Path('/proc/cpuinfo').read_text().splitlines() if line.startswith('flags'))
    except (OSError, StopIteration):
        return []
    return sorted({'amx_bf16', 'avx512_bf16'} & set(flags.split(':', 1)[1].split()))


def commit() -> Optional[str]:
    """The repository's commit (with ``+dirty`` when the tree has uncommitted changes), None outside a checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(['git', 'rev-parse', '--short=12', 'HEAD'], cwd=root, capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no'], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ('+dirty' if dirty.stdout.strip() else '')


def versions() -> Dict[str, Optional[str]]:
    """torch, Triton, timm and Python versions (None for one not installed)."""
    found: Dict[str, Optional[str]] = {'python': platform.python_version(), 'torch': torch.__version__}
    for name in ('triton', 'timm'):
        try:
            found[name] = __import__(name).__version__
        except ImportError:
            found[name] = None
    return found


def machine_record(device: torch.device, cpu_count: bool = False) -> Dict[str, Optional[object]]:
    """Where and with what a figure was measured: commit, platform, CPU model and its bf16 units, versions, threads
    (and the CPU count) and the CUDA device's name."""
    record: Dict[str, Optional[object]] = {
        'commit': commit(), 'platform': platform.platform(), 'processor': cpu_model(), 'bf16_units': bf16_units(),
        **versions(), 'threads': torch.get_num_threads()}
    if cpu_count:
        record['cpu_count'] = os.cpu_count()
    record['cuda_device'] = torch.cuda.get_device_name(device) if device.type == 'cuda' else None
    return record


def malloc_note(kept: bool, device: torch.device) -> str:
    """The allocator policy for a run's header line (CPU only: see jetvit_mm/benchmark/allocator.py)."""
    if device.type != 'cpu':
        return ''
    return ', malloc keeps freed memory' if kept else ', system malloc (freed blocks may be unmapped)'


def malloc_record(policy: str, kept: bool, device: torch.device) -> Dict[str, object]:
    return {'policy': policy, 'applied': kept, 'device': device.type}
