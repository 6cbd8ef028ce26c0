"""Process-wide state in one place (as timm's ``layers/config.py``): the switches, read and set only here, and
:func:`reset_caches`, which empties the memo tables the kernels keep for the process (tests; a kernel's code changed
at run time). Kept for the process and never reset, as facts of it or costly to rebuild: ``kernels/availability.py``
(Triton importable, a C++ compiler found), ``kernels/compiled.py`` (each core's torch.compile), ``linear_triton.py``
and ``linear_triton_bwd.py`` (the Triton modules of the interpret mode) and ``mm/fsdp_checkpoint.py`` (the DCP
metadata allow-list). Pure Python: importable without torch and OpenMMLab."""
import sys

SWITCHES = dict(
    fixed_grid=False,  # an export at one input shape: W keeps its windows (models/tracing.py:fixed_grid_export)
    group_torn_down=False,  # a process group was destroyed here: the tool leaves early (mm/launch.py:run_main)
)
# (module, its memo table): a dict, or a functools cache
CACHES = (('jetvit_mm.models.mixers.kernels.selfcheck', 'VERDICTS'),  # (kernel, device, dtype) -> agreed
          ('jetvit_mm.models.mixers.kernels.window_flex', '_CACHE'),  # block masks, query orders
          ('jetvit_mm.models.mixers.kernels.linear_fused', '_TABLES'),  # RoPE rotation tables
          ('jetvit_mm.models.token_reduction', '_kept_neighbour_index'))  # clustering indices per grid


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
    """Empty every memo table of :data:`CACHES` whose module is loaded: each fast kernel is self-checked afresh at
    its next use, masks and tables are built again."""
    for module, name in CACHES:
        if module in sys.modules:
            table = getattr(sys.modules[module], name)
            (table.cache_clear if hasattr(table, 'cache_clear') else table.clear)()
