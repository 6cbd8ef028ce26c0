"""Which fast mixer paths this process can run, per device type (checked once, lazily: nothing is imported here
until a path is asked for)."""
import functools
import importlib.util
import os

import torch


def triton_interpreting() -> bool:
    """True when ``TRITON_INTERPRET=1``: Triton kernels then run on CPU tensors (slowly), for tests."""
    return os.environ.get('TRITON_INTERPRET', '0') == '1'


@functools.cache
def _triton_importable() -> bool:
    return importlib.util.find_spec('triton') is not None


def triton_available(device_type: str) -> bool:
    """Triton kernels run on CUDA devices, and on the CPU under ``TRITON_INTERPRET=1``."""
    if not _triton_importable():
        return False
    if device_type == 'cuda':
        return torch.cuda.is_available()
    return device_type == 'cpu' and triton_interpreting()


@functools.cache
def _cpp_compiler_found() -> bool:
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        get_cpp_compiler()
    except Exception:  # any failure to find or run a compiler means: no inductor on the CPU
        return False
    return True


def compile_available(device_type: str) -> bool:
    """torch.compile (inductor) needs a C++ compiler on the CPU and Triton on CUDA."""
    if device_type == 'cpu':
        return _cpp_compiler_found()
    if device_type == 'cuda':
        return torch.cuda.is_available() and _triton_importable()
    return False


def flex_available(device_type: str) -> bool:
    """FlexAttention runs compiled: wherever torch.compile does (torch >= 2.5 ships it)."""
    return importlib.util.find_spec('torch.nn.attention.flex_attention') is not None and compile_available(device_type)
