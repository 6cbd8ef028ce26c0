"""The arch shortcuts of the benchmarks: ``teacher`` (all F), ``all-L``, ``all-W`` and ``2F``, a paper-style hybrid
with two F layers near the end."""
from typing import Optional

from jetvit_mm.models.mixers import validate_arch

# docs/method.md's 12-layer example: F at layers 9 and 11, the last layers, where the paper's search put DINOv3's full
# attention for a linear-probe head; other depths: F at the paper's DINOv3-L layers (14 and 22 of 24) scaled to depth
TWO_FULL_ARCHS = {12: 'LWLLWWLLWFLF'}
ARCH_SHORTCUTS = ('teacher', '2F', 'all-L', 'all-W')
DISTILL_KERNEL_ARCHS = ('all-L', 'all-W', '2F')  # distill-kernels: L alone, W alone, and the hybrid


def two_full_arch(depth: int) -> str:
    """A paper-style hybrid with 2 F layers near the end, the rest in the L/W pattern ``LWLLWW``."""
    if depth in TWO_FULL_ARCHS:
        return TWO_FULL_ARCHS[depth]
    letters = ['LWLLWW'[i % 6] for i in range(depth)]
    for i in (depth * 14 // 24, depth * 22 // 24):
        letters[i] = 'F'
    return ''.join(letters)


def resolve_arch(name: str, depth: int, letters: Optional[str] = None) -> str:
    """An arch string from a shortcut (teacher, 2F, all-L, all-W, all-<letter> for any of ``letters``, a model's
    declared letters) or an arch string itself (validated against ``letters``, default L, W, F)."""
    shortcuts = {'teacher': 'F' * depth, '2F': two_full_arch(depth), 'all-L': 'L' * depth, 'all-W': 'W' * depth}
    shortcuts.update({f'all-{letter}': letter * depth for letter in letters or ''})
    if name in shortcuts:
        return shortcuts[name]
    try:
        return validate_arch(name, depth, letters)
    except ValueError as e:
        raise ValueError(f'{e} (or a shortcut: {", ".join(ARCH_SHORTCUTS)})') from None
