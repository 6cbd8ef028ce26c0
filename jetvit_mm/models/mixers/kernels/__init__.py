"""Fast paths of the efficient mixers, behind one switch per mixer (:mod:`.dispatch`). Importing this package
imports torch only: Triton, inductor and FlexAttention load when a path that needs them first runs."""
from .compiled import compiled
from .dispatch import (
    AUTO_COMPILE_MIN_ELEMENTS,
    LINEAR_KERNELS,
    WINDOW_KERNELS,
    available_kernels,
    check_kernel,
    resolve_once,
    select_linear_kernel,
    select_window_kernel,
)
from .linear_fused import fused_linear_attention, rotation_table
from .linear_triton import triton_linear_attention
from .window_flex import flex_window_attention

__all__ = [
    'AUTO_COMPILE_MIN_ELEMENTS', 'LINEAR_KERNELS', 'WINDOW_KERNELS', 'available_kernels', 'check_kernel', 'compiled',
    'flex_window_attention', 'fused_linear_attention', 'resolve_once', 'rotation_table', 'select_linear_kernel',
    'select_window_kernel', 'triton_linear_attention',
]
