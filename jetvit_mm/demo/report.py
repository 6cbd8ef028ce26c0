"""The demo's results: the table (``results.md``), its JSON and the plot of the searched archs against their latency."""
import shutil
from pathlib import Path
from typing import Dict, List, Optional

from jetvit_mm.models.token_reduction import ClusterSpec
from jetvit_mm.search.latency import predict_latency
from jetvit_mm.search.report import pareto_front

from .latency import clustering_latency, small_teacher_latency

ROWS = (('teacher', 'teacher (all F)'), ('all_L', 'all L'), ('all_W', 'all W'), ('step1', 'Step 1: L+W search'),
        ('1F', 'Step 2: + 1 F'), ('2F', 'Step 2: + 2 F'),
        ('cluster_2F', 'teacher + token clustering, near 2-F speed'),
        ('cluster_all_L', 'teacher + token clustering, near all-L speed'),
        ('teacher_small', 'smaller teacher (half width)'),
        ('inherit_all', 'all L, every weight inherited'), ('inherit_mlp', 'all L, MLPs only inherited'))
ALTERNATIVES = ('cluster_', 'teacher_small')  # tags of the rows that are not JetViT archs (no search score)


def row_latency(tag: str, arch: str, table: Dict[str, float], clusterings: Dict[str, ClusterSpec]) -> float:
    """Predicted ms at 1024x2048 of a row: the arch's blocks, the clustering baseline's parts (DINOv3-B shapes) or
    the smaller teacher's blocks (DINOv3-S shapes)."""
    if tag in clusterings:
        return clustering_latency(clusterings[tag], table, len(arch))
    if tag == 'teacher_small':
        return small_teacher_latency(table, len(arch))
    return predict_latency(arch, table)


def write_report(work: Path, search_dir: Path, summary: dict, archs: Dict[str, str], miou: Dict[str, float],
                 table: Optional[Dict[str, float]], clusterings: Optional[Dict[str, ClusterSpec]] = None) -> dict:
    """results.md, the plots in the work dir; returns the report (with its markdown). ``archs['teacher']`` is the
    all-F arch (its length the depth); ``clusterings``: the token-clustering rows' strengths by tag."""
    teacher, clusterings = archs['teacher'], clusterings or {}
    search_scores: Dict[str, float] = {}
    for record in summary['archs']:
        search_scores.setdefault(record['arch'], record['score'])  # Step-1 score of the Step-1 archs
    search_scores[teacher] = summary['teacher_score']
    teacher_ms = predict_latency(teacher, table) if table else None
    rows = []
    for tag, title in ROWS:
        if tag not in miou:
            continue
        arch = archs[tag]
        ms = row_latency(tag, arch, table, clusterings) if table else None
        # the fixed-arch distillations and the alternatives are not paths of the supernets
        searched = None if tag.startswith(('inherit',) + ALTERNATIVES) else search_scores.get(arch)
        rows.append(dict(tag=tag, model=title, arch=arch, F=arch.count('F'), W=arch.count('W'), L=arch.count('L'),
                         clustering=clusterings[tag].text if tag in clusterings else None,
                         mIoU=round(miou[tag], 2), search_mIoU=searched,
                         latency_ms=round(ms, 1) if ms else None,
                         speedup=round(teacher_ms / ms, 2) if ms else None))
    lines = ['| model | arch | mIoU (probe) | search mIoU | latency 1024x2048 (ms) | speed-up |',
             '|---|---|---:|---:|---:|---:|']
    for r in rows:
        search = f'{r["search_mIoU"]:.2f}' if r['search_mIoU'] is not None else '-'
        ms = f'{r["latency_ms"]:.0f}' if r['latency_ms'] else '-'
        speed = f'{r["speedup"]:.2f}x' if r['speedup'] else '-'
        arch = f'`{r["arch"]}`' + (f' + `{r["clustering"]}`' if r['clustering'] else '')
        lines.append(f'| {r["model"]} | {arch} | {r["mIoU"]:.2f} | {search} | {ms} | {speed} |')
    markdown = '\n'.join(lines)
    notes = ('mIoU (probe): linear probe (BN + 1x1 conv) trained on the frozen backbone, val split; students '
             'fine-tuned by distillation for the same number of steps first. search mIoU: the supernet path '
             'with the teacher\'s head, as tools/search.py scored it (teacher: its own head). Latency: DINOv3-B '
             'shapes (768 wide, 12 heads, window 16) at 1024x2048, batch 1, fp32, on this CPU: one block per '
             'mixer timed, summed per arch (jetvit_mm.search.latency.predict_latency). Token clustering '
             '(jetvit_mm.models.token_reduction, f<FACTOR>@<AFTER>: FACTOR x FACTOR tokens per cluster after block '
             'AFTER): the teacher\'s weights untouched, its probe trained on the clustered backbone; latency: the '
             'blocks on full and on clustered tokens, the clustering and the reconstruction, each timed. Smaller '
             'teacher: half the width, trained with the teacher\'s recipe and steps; latency with DINOv3-S shapes '
             '(384 wide, 6 heads).')
    (work / 'results.md').write_text(markdown + '\n\n' + notes + '\n')
    for name in ('pareto_step1.png', 'pareto_step2.png', 'layer_gains_step1.png', 'layer_gains_step2.png'):
        if (search_dir / name).is_file():
            shutil.copy(search_dir / name, work / name)
    if table:
        plot_search(summary, table, rows, teacher, work / 'pareto_dinov3b_1024x2048.png')
    return dict(rows=rows, markdown=markdown, notes=notes, latency_table_ms=table,
                step1_arch=archs.get('step1'), step2_archs=[archs.get(t) for t in ('step1', '1F', '2F')])


def plot_search(summary: dict, table: Dict[str, float], rows: List[dict], teacher: str, path: Path) -> None:
    """Left: every scored arch, search mIoU vs DINOv3-B latency at 1024x2048, by step, the Pareto front of each step
    and the archs of the table. Right: every row of the table (the alternatives too), probe mIoU vs latency."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, (ax, ax_probe) = plt.subplots(1, 2, figsize=(13, 4.8), dpi=110)
    for stage, color in ((1, 'C0'), (2, 'C1')):
        points = {r['arch']: (r['score'], predict_latency(r['arch'], table) / 1e3)
                  for r in summary['archs'] if r['stage'] == stage}
        if not points:
            continue
        ax.scatter([p[1] for p in points.values()], [p[0] for p in points.values()], s=10, c=color, alpha=.5,
                   label=f'Step {stage}: scored archs ({len(points)})')
        front = pareto_front(points)
        ax.plot([points[a][1] for a in front], [points[a][0] for a in front], '-', c=color, lw=1)
    teacher_s = predict_latency(teacher, table) / 1e3
    ax.scatter([teacher_s], [summary['teacher_score']], marker='*', s=150, c='C3', label='teacher (all F)', zorder=3)
    for r in rows:
        if r['search_mIoU'] is not None and r['tag'] != 'teacher' and r['latency_ms']:
            ax.annotate(r['model'], (r['latency_ms'] / 1e3, r['search_mIoU']), fontsize=7, xytext=(4, -10),
                        textcoords='offset points')
    ax.set_xlabel('latency at 1024x2048, DINOv3-B shapes, this CPU (s, predicted per block)')
    ax.set_ylabel('search mIoU (supernet path, teacher head)')
    ax.set_title('JetViT demo: searched archs', fontsize=9)
    ax.legend(fontsize=7, loc='lower right')
    plot_table_rows(ax_probe, rows)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_table_rows(ax, rows: List[dict]) -> None:
    """The table's rows, probe mIoU vs latency: teacher, hybrids, token clustering, smaller teacher; the Pareto front
    of them all."""
    styles = {'teacher': ('*', 'C3', 150), 'cluster': ('^', 'C2', 50), 'teacher_small': ('s', 'C4', 50)}
    points = {}
    for r in rows:
        if not r['latency_ms'] or r['tag'].startswith('inherit'):
            continue
        kind = 'cluster' if r['tag'].startswith('cluster_') else r['tag']
        marker, color, size = styles.get(kind, ('o', 'C1', 30))
        x = r['latency_ms'] / 1e3
        points[r['tag']] = (r['mIoU'], x)
        ax.scatter([x], [r['mIoU']], marker=marker, c=color, s=size, zorder=3)
        label = r['model'] if not r['clustering'] else f'token clustering {r["clustering"]}'
        ax.annotate(label, (x, r['mIoU']), fontsize=7, xytext=(4, -10), textcoords='offset points')
    front = pareto_front(points)
    ax.plot([points[t][1] for t in front], [points[t][0] for t in front], 'k-', lw=.8, label='Pareto front')
    ax.set_xlabel('latency at 1024x2048, this CPU (s; DINOv3-B shapes, the smaller teacher DINOv3-S shapes)')
    ax.set_ylabel('probe mIoU (val)')
    ax.set_title('the table: hybrids (o), token clustering (^), smaller teacher (s), teacher (*)', fontsize=9)
    ax.legend(fontsize=7, loc='lower right')
