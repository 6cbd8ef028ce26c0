"""Search outputs: the Pareto front (score vs predicted latency) and the per-layer gain heat map (Fig. 7)."""
import math
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .beam import BeamStage


def pareto_front(points: Dict[str, Sequence[float]]) -> List[str]:
    """Archs not dominated in (higher score, lower latency), sorted by latency. ``points``: arch -> (score, ms)."""
    front, best = [], float('-inf')
    for arch, (score, _) in sorted(points.items(), key=lambda kv: (kv[1][1], -kv[1][0], kv[0])):
        if score > best:
            front.append(arch)
            best = score
    return front


def _moves_layer(parent: str, child: str, layer: int) -> bool:
    """Whether ``child`` is ``parent`` with layer ``layer`` (and only it) changed."""
    return (len(child) == len(parent) and child[layer] != parent[layer]
            and child[:layer] == parent[:layer] and child[layer + 1:] == parent[layer + 1:])


def layer_gains(stages: Sequence[BeamStage], scores: Dict[str, float], depth: int, kind: Optional[str] = None,
                moves: Optional[Callable[[str], Iterable[str]]] = None) -> List[List[float]]:
    """Per search stage, the score gain of each one-layer move from the previous stage's best arch (NaN where not
    scored), independent of the order the candidates were scored in.

    ``moves``: arch -> the moves the search makes from it (``step1_moves``, ``step2_moves``); each one in ``scores``
    counts, whichever stage scored it (default: the moves among each stage's candidates). With ``kind``, only the
    moves of a layer to that kind (a heat-map panel per kind); without it, each layer's best move."""
    rows = []
    for previous, stage in zip(stages, stages[1:]):
        parent = previous.best_arch
        children = sorted(set(moves(parent) if moves is not None else stage.candidates))
        row = []
        for i in range(depth):
            gains = [scores[child] - scores[parent] for child in children
                     if child in scores and _moves_layer(parent, child, i) and (kind is None or child[i] == kind)]
            finite = [g for g in gains if math.isfinite(g)]
            row.append(max(finite) if finite else gains[0] if len(gains) == 1 else float('nan'))
        rows.append(row)
    return rows


def plot_pareto(points: Dict[str, Sequence[float]], path: Path, metric: str, teacher: Sequence[float] = None) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    front = pareto_front(points)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.scatter([p[1] for p in points.values()], [p[0] for p in points.values()], s=12, c='0.6', label='scored archs')
    ax.plot([points[a][1] for a in front], [points[a][0] for a in front], 'o-', c='C0', label='Pareto front')
    if teacher is not None:
        ax.scatter([teacher[1]], [teacher[0]], marker='*', s=120, c='C3', label='teacher (all F)')
    ax.set_xlabel('predicted latency (ms)')
    ax.set_ylabel(metric)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_gains(rows: Union[List[List[float]], Mapping[str, List[List[float]]]], path: Path, title: str) -> None:
    """The per-layer gain heat map; ``rows`` per kind (``{letter: rows}``) draws one panel per kind."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np

    panels = (dict(rows) if isinstance(rows, Mapping) else {None: rows}) or {None: []}
    arrays = {k: np.array(r, dtype=float) if r else np.zeros((0, 0)) for k, r in panels.items()}
    cols = max(a.shape[1] for a in arrays.values()) if arrays else 0
    height = max(a.shape[0] for a in arrays.values()) if arrays else 0
    fig, axes = plt.subplots(1, len(arrays), squeeze=False, dpi=100,
                             figsize=(len(arrays) * max(4, 0.45 * cols + 2), max(2, 0.45 * height + 1.5)))
    for ax, (kind, data) in zip(axes[0], arrays.items()):
        _gain_panel(fig, ax, data, title if kind is None else f'{title}: to {kind}')
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _gain_panel(fig, ax, data, title: str) -> None:
    import numpy as np

    if data.size:
        im = ax.imshow(data, cmap='RdYlGn', aspect='auto')
        fig.colorbar(im, ax=ax, label='score gain')
        for (r, c), v in np.ndenumerate(data):
            if np.isfinite(v):
                ax.text(c, r, f'{v:.2f}', ha='center', va='center', fontsize=6)
        ax.set_xticks(range(data.shape[1]))  # integer ticks: one per layer and per round
        ax.set_yticks(range(data.shape[0]))
    ax.set_xlabel('layer')
    ax.set_ylabel('beam-search round')
    ax.set_title(title, fontsize=9)
