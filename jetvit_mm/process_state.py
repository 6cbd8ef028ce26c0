"""Process-wide state in one place (as timm's ``layers/config.py``): the switches, read and set here, and the memo
tables the kernels keep, emptied by :func:`reset_caches` (tests; a kernel's code changed at run time). Kept and never
reset, as facts of the process or costly to rebuild: ``kernels/availability.py`` (Triton, a C++ compiler),
``kernels/compiled.py`` (each core's torch.compile), ``kernels/linear_triton.py`` (the Triton modules of the
interpreter mode), ``mm/checkpoint/fsdp.py`` (the DCP metadata allow-list). Pure Python, no torch, no OpenMMLab."""
import sys

SWITCHES = dict(
    fixed_grid=False,  # an export at one input shape: W keeps its windows (models/tracing.py:fixed_grid_export)
    group_torn_down=False,  # a process group was destroyed here: the tool leaves early (mm/engine/launch.py:run_main)
)
CACHES = (('jetvit_mm.models.mixers.kernels.selfcheck', 'VERDICTS'),  # (kernel, device, dtype) -> it agreed
          ('jetvit_mm.models.mixers.kernels.window_flex', '_CACHE'),  # block masks, query orders
          ('jetvit_mm.models.mixers.kernels.linear_fused', '_TABLES'),  # RoPE rotation tables
          ('jetvit_mm.models.token_reduction', '_kept_neighbour_index'))  # clustering indices (a functools cache)


def switch(name: str) -> bool:
    """The value of the switch ``name`` (a key of :data:`SWITCHES`)."""
    return SWITCHES[name]


def set_switch(name: str, value: bool) -> bool:
    """Set the switch ``name``; returns its previous value. ValueError naming the switches for an unknown name."""
    if name not in SWITCHES:
        raise ValueError(f'unknown switch {name!r}; valid: {", ".join(SWITCHES)}')
    previous, SWITCHES[name] = SWITCHES[name], bool(value)
    return previous


def reset_caches() -> None:
    """Empty the memo tables of :data:`CACHES` (those loaded): each fast kernel is self-checked afresh at its next
    use, masks and tables are built again."""
    for module, name in CACHES:
        if module in sys.modules:
            table = getattr(sys.modules[module], name)
            (table.cache_clear if hasattr(table, 'cache_clear') else table.clear)()
