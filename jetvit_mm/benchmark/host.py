"""The host side of a benchmark run: torch threads and the allocator policy set before timing, and the record of the
machine, date and policy written with every result."""
import datetime
import os
import platform
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


def machine_record(device: torch.device, cpu_count: bool = False) -> Dict[str, Optional[object]]:
    """Platform, processor, torch version, threads (and the CPU count) and the CUDA device's name."""
    record: Dict[str, Optional[object]] = {
        'platform': platform.platform(), 'processor': platform.processor(), 'torch': torch.__version__,
        'threads': torch.get_num_threads()}
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
