"""The speed and memory targets of docs/benchmarks.md, checked on what a benchmark measured.

Each check returns ``{'target': text, 'value': measured text, 'met': bool}``; verdicts are on medians.
"""
from typing import Dict, List, Optional, Tuple

# mixers: the L mixer's cost against full attention, the squeeze conv's cost in a block, the token-wise conv's excess
L_SQUEEZE_OVER_F = 1 / 20
SQUEEZE_BLOCK_OVERHEAD = 0.05
TOKEN_CONV_SLOWDOWN = 1.1
# the fast paths (issue 39's GPU targets, bf16 + CUDA graphs at 1024x2048): L-squeeze and W against full attention
FAST_L_OVER_F, FAST_W_OVER_F = 0.12, 0.17
FAST_KERNEL_NAMES = ('auto', 'compile', 'flex', 'triton')
# whole models at 1024x2048 against the all-F teacher, and the latency growth for 4x the tokens
MODEL_SPEEDUPS = (('2F', 1.9), ('all-L', 2.5))
# issue 20's whole-model targets for the fast paths, per (device, dtype, compiled or graphed) at 1024x2048
FAST_MODEL_SPEEDUPS = {
    ('cpu', 'bf16', False): (('2F', 2.4), ('all-L', 3.5)),
    ('cpu', 'bf16', True): (('2F', 2.8), ('all-L', 4.5)),
    ('cpu', 'fp32', False): (('2F', 2.15), ('all-L', 2.9)),
    ('cuda', 'bf16', True): (('2F', 2.0), ('all-L', 2.8)),
}
SMALL, LARGE = '512x1024', '1024x2048'
# issue 39: DINOv3-B at 1024x2048, bf16 + CUDA graphs, the hybrid at its fastest against each teacher at its own
TEACHER_BASELINE_SPEEDUPS = {'eager': (('2F', 2.2), ('all-L', 2.9)), 'compiled': (('2F', 1.9), ('all-L', 2.4))}
ALL_L_MAX_GROWTH = 4.5
TEACHER_MIN_GROWTH = 4.0
MEMORY_MARGIN = 0.01  # a memory target counts as met only below the reference by more than this fraction
# a supernet's distillation step against a fixed-arch student's with the same path
SUPERNET_STEP_MAX_RATIO = 1.25

Stats = Dict[str, Dict[str, float]]
Row = Dict[str, object]


def mixer_targets(stats: Stats) -> List[Dict[str, object]]:
    """The mixer targets on ``tools/benchmark.py mixers`` stats (the token check on medians and on minima)."""
    med = {name: s['median_ms'] for name, s in stats.items()}
    ratio_l_f = med['L-squeeze'] / med['F']
    block_overhead = med['block L-squeeze'] / med['block L-static'] - 1
    token_ratio = med['L-token'] / med['L-static']
    token_min_ratio = stats['L-token']['min_ms'] / stats['L-static']['min_ms']
    slower = f'{(TOKEN_CONV_SLOWDOWN - 1) * 100:+.0f}%'
    fast = []
    for name in med:  # the fast-path entries: 'L-squeeze <kernel>', 'W<size> <kernel>'
        mixer, _, kernel = name.partition(' ')
        goal = FAST_L_OVER_F if mixer == 'L-squeeze' else FAST_W_OVER_F if mixer.startswith('W') else None
        if goal is not None and kernel in FAST_KERNEL_NAMES:
            ratio = med[name] / med['F']
            fast.append({'target': f'{name} <= {goal} of F (the fast paths\' GPU target)', 'value': f'{ratio:.3f}',
                         'met': ratio <= goal})
    return fast + [
        {'target': f'L-squeeze <= 1/{1 / L_SQUEEZE_OVER_F:.0f} of F',
         'value': f'{ratio_l_f:.3f} (1/{1 / ratio_l_f:.1f})', 'met': ratio_l_f <= L_SQUEEZE_OVER_F},
        {'target': f'block: squeeze <= +{SQUEEZE_BLOCK_OVERHEAD:.0%} over static',
         'value': f'{block_overhead * 100:+.1f}%', 'met': block_overhead <= SQUEEZE_BLOCK_OVERHEAD},
        {'target': f'L-token measurably slower than L-static (>= {slower} in median and in min)',
         'value': f'x{token_ratio:.2f} (median), x{token_min_ratio:.2f} (min)',
         'met': token_ratio >= TOKEN_CONV_SLOWDOWN and token_min_ratio >= TOKEN_CONV_SLOWDOWN},
    ]


def distill_step_target(ratio: float) -> Dict[str, object]:
    """Supernet step / fixed-arch step (medians) at most ``SUPERNET_STEP_MAX_RATIO``."""
    return {'target': f'supernet step / fixed-arch step <= {SUPERNET_STEP_MAX_RATIO}',
            'value': f'x{ratio:.3f} (median)', 'met': ratio <= SUPERNET_STEP_MAX_RATIO}


def _row(rows: List[Row], size: str, label: str) -> Optional[Row]:
    return next((r for r in rows if r['size'] == size and r['label'] == label), None)


def _quiet_note(value: Optional[float]) -> str:
    return f', x{value:.2f} (median of quiet samples)' if value else ''


def model_targets(rows: List[Row], mode: Optional[Tuple[str, str, bool]] = None) -> List[Dict[str, object]]:
    """The whole-model targets on ``tools/benchmark.py models`` rows, for those whose entries were measured;
    ``mode`` (device, dtype, compiled or CUDA-graphed) adds the fast paths' targets of that mode."""
    targets = []
    fast = [(label, goal, f' ({mode[0]} {mode[1]}{", compiled" if mode[2] else ""})')
            for label, goal in FAST_MODEL_SPEEDUPS.get(mode, ())] if mode else []
    for label, goal, note in [(label, goal, '') for label, goal in MODEL_SPEEDUPS] + fast:
        r = _row(rows, LARGE, label)
        if r and r['speedup']:
            targets.append({'target': f'{label} >= {goal}x faster than the teacher at {LARGE}{note}',
                            'value': f'x{r["speedup"]:.2f} (median), x{r["speedup_min"]:.2f} (min)'
                                     + _quiet_note(r.get('speedup_quiet')),
                            'met': r['speedup'] >= goal})
    growth_rules = (('all-L', lambda g: g <= ALL_L_MAX_GROWTH, f'at most {ALL_L_MAX_GROWTH}x'),
                    ('teacher', lambda g: g > TEACHER_MIN_GROWTH, f'super-linear (> {TEACHER_MIN_GROWTH:.0f}x)'))
    for label, check, rule in growth_rules:
        a, b = _row(rows, SMALL, label), _row(rows, LARGE, label)
        if a and b:
            growth = b['median_ms'] / a['median_ms']
            quiet = (b['quiet_median_ms'] / a['quiet_median_ms']
                     if a.get('quiet_median_ms') and b.get('quiet_median_ms') else None)
            targets.append({'target': f'{label} latency growth {SMALL} -> {LARGE} (4x tokens) {rule}',
                            'value': f'x{growth:.2f} (median), x{b["min_ms"] / a["min_ms"]:.2f} (min)'
                                     + _quiet_note(quiet),
                            'met': check(growth)})
    t, hyb = _row(rows, LARGE, 'teacher'), _row(rows, LARGE, '2F')
    if t and hyb and 'memory' in t and 'memory' in hyb:
        change = hyb['peak_increase_mib'] / t['peak_increase_mib'] - 1
        targets.append({'target': f'2F peak forward memory below the teacher\'s at {LARGE} (by more than '
                                  f'{MEMORY_MARGIN:.0%}: page-level noise is not a saving)',
                        'value': f'{hyb["peak_increase_mib"]:.1f} MiB vs {t["peak_increase_mib"]:.1f} MiB '
                                 f'({change:+.2%})',
                        'met': change < -MEMORY_MARGIN})
    return targets


def print_targets(targets: List[Dict[str, object]]) -> None:
    """One line per target: MET or MISS, the target, the measured value."""
    for t in targets:
        print(f'{"MET " if t["met"] else "MISS"}  {t["target"]}: {t["value"]}')


def baseline_targets(rows: List[Row], size: str = LARGE) -> List[Dict[str, object]]:
    """Issue 39's targets on the rows of ``tools/gpu_check.py baselines`` (each arch's run against the fastest eager
    and the fastest compiled teacher of its size): each hybrid at its fastest run against each teacher; a target
    whose rows were not measured is left out."""
    targets = []
    for ref, goals in TEACHER_BASELINE_SPEEDUPS.items():
        key = f'x_vs_{ref}_teacher'
        for label, goal in goals:
            ratios = [r[key] for r in rows if r['size'] == size and r['label'] == label and key in r]
            if ratios:
                best = max(ratios)
                targets.append({'target': f'{label} >= x{goal} against the {ref} teacher ({size})',
                                'value': f'x{best:.2f}', 'met': best >= goal})
    return targets
