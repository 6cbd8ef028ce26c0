"""The scaling plot of a ``tools/benchmark.py models`` result: latency against input size per arch."""
from pathlib import Path
from typing import Dict, List

import torch

from jetvit_mm.models.mixers import DEFAULT_MIXERS

from .host import malloc_note


def plot_scaling(rows: List[Dict[str, object]], path: Path, title: str) -> None:
    """Median latency (min-max bars) vs patch tokens per arch, log-log, with a linear-in-tokens guide."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    fig, ax = plt.subplots(figsize=(5.5, 3.8), dpi=100)
    labels = list(dict.fromkeys(r['label'] for r in rows))
    for label in labels:
        rs = sorted((r for r in rows if r['label'] == label), key=lambda r: r['tokens'])
        xs = [r['tokens'] for r in rs]
        ys = [r['median_ms'] / 1e3 for r in rs]
        err = [[(r['median_ms'] - r['min_ms']) / 1e3 for r in rs], [(r['max_ms'] - r['median_ms']) / 1e3 for r in rs]]
        name = label if label == rs[0]['arch'] else f'{label} ({rs[0]["arch"]})'
        ax.errorbar(xs, ys, yerr=err, marker='o', capsize=3, label=name)
    fastest = min((r for r in rows), key=lambda r: (r['tokens'], r['median_ms']))
    xs = sorted({r['tokens'] for r in rows})
    ax.plot(xs, [fastest['median_ms'] / 1e3 * t / xs[0] for t in xs], 'k:', lw=1, label='linear in tokens')
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.set_xticks(xs)
    ax.set_xticklabels([next(r['size'] for r in rows if r['tokens'] == t) for t in xs])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f'{v:g}'))
    ax.yaxis.set_minor_locator(NullLocator())
    patch = rows[0].get('patch_size', 16)  # results from before patch_size was recorded are all patch 16
    ax.set_xlabel(f'input size (patch tokens: {patch}x{patch} px each)')
    ax.set_ylabel('forward latency, s (median, min-max)')
    ax.set_title(title, fontsize=9)
    ax.grid(True, which='major', alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def linear_options(kwargs: Dict[str, object]) -> Dict[str, object]:
    """The L-mixer options a measured model set beyond the default table's (``mixers.L``; ``linear_cfg`` in results
    saved before the mixer table was the one way)."""
    if kwargs.get('linear_cfg'):
        return dict(kwargs['linear_cfg'])
    entry = dict((kwargs.get('mixers') or {}).get('L') or {})
    return {k: v for k, v in entry.items() if k != 'type' and DEFAULT_MIXERS['L'].get(k) != v}


def scaling_title(result: Dict[str, object]) -> str:
    """The plot title of a saved ``models`` result: model (+ head), dtype, L options, batch, device, CUDA graphs."""
    a, machine = result['args'], result.get('machine', {})
    malloc = result.get('malloc')  # absent in results from before the allocator option
    where = machine.get('cuda_device') or (f'{a["device"]} ({machine.get("threads")} threads'
                                           f'{malloc_note(malloc["applied"], torch.device("cpu")) if malloc else ""})')
    graph = ', CUDA graphs' if a.get('cuda_graph') else ''
    linear = ''.join(f', L {k}={v}' for k, v in linear_options(result['entries'][-1]['kwargs']).items())
    head = ' + DPT head' if result['entries'][0].get('head') else ''
    return (f'{result["entries"][0]["kwargs"]["model_name"]}{head}, {a["dtype"]}{linear}, batch {a["batch"]}, '
            f'{where}{graph}')
