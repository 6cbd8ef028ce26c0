"""Search outputs: the Pareto front (score vs predicted latency) and the per-layer gain heat map (Fig. 7)."""
from pathlib import Path
from typing import Dict, List, Sequence

from .beam import Stage


def pareto_front(points: Dict[str, Sequence[float]]) -> List[str]:
    """Archs not dominated in (higher score, lower latency), sorted by latency. ``points``: arch -> (score, ms)."""
    front, best = [], float('-inf')
    for arch, (score, _) in sorted(points.items(), key=lambda kv: (kv[1][1], -kv[1][0], kv[0])):
        if score > best:
            front.append(arch)
            best = score
    return front


def layer_gains(stages: Sequence[Stage], scores: Dict[str, float], depth: int) -> List[List[float]]:
    """Per stage, the score gain of each one-layer move from the previous stage's best arch (NaN if not scored)."""
    rows = []
    for previous, stage in zip(stages, stages[1:]):
        parent = previous.best_arch
        row = []
        for i in range(depth):
            child = next((a for a in stage.candidates if a[:i] == parent[:i] and a[i + 1:] == parent[i + 1:]
                          and a[i] != parent[i]), None)
            row.append(scores[child] - scores[parent] if child in scores else float('nan'))
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


def plot_gains(rows: List[List[float]], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np

    data = np.array(rows, dtype=float) if rows else np.zeros((0, 0))
    fig, ax = plt.subplots(figsize=(max(4, 0.45 * data.shape[1] + 2), max(2, 0.45 * data.shape[0] + 1.5)), dpi=100)
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
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
