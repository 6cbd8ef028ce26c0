"""The demo's results: the table (``results.md``), its JSON and the plot of the searched archs against their latency."""
import shutil
from pathlib import Path
from typing import Dict, List, Optional

from jetvit_mm.search.latency import predict_latency
from jetvit_mm.search.report import pareto_front

ROWS = (('teacher', 'teacher (all F)'), ('all_L', 'all L'), ('all_W', 'all W'), ('step1', 'Step 1: L+W search'),
        ('1F', 'Step 2: + 1 F'), ('2F', 'Step 2: + 2 F'), ('inherit_all', 'all L, every weight inherited'),
        ('inherit_mlp', 'all L, MLPs only inherited'))


def write_report(work: Path, search_dir: Path, summary: dict, archs: Dict[str, str], miou: Dict[str, float],
                 table: Optional[Dict[str, float]]) -> dict:
    """results.md, the plots in the work dir; returns the report (with its markdown). ``archs['teacher']`` is the
    all-F arch (its length the depth)."""
    teacher = archs['teacher']
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
        ms = predict_latency(arch, table) if table else None
        searched = None if tag.startswith('inherit') else search_scores.get(arch)  # not from the supernets
        rows.append(dict(tag=tag, model=title, arch=arch, F=arch.count('F'), W=arch.count('W'), L=arch.count('L'),
                         mIoU=round(miou[tag], 2), search_mIoU=searched,
                         latency_ms=round(ms, 1) if ms else None,
                         speedup=round(teacher_ms / ms, 2) if ms else None))
    lines = ['| model | arch | mIoU (probe) | search mIoU | latency 1024x2048 (ms) | speed-up |',
             '|---|---|---:|---:|---:|---:|']
    for r in rows:
        search = f'{r["search_mIoU"]:.2f}' if r['search_mIoU'] is not None else '-'
        ms = f'{r["latency_ms"]:.0f}' if r['latency_ms'] else '-'
        speed = f'{r["speedup"]:.2f}x' if r['speedup'] else '-'
        lines.append(f'| {r["model"]} | `{r["arch"]}` | {r["mIoU"]:.2f} | {search} | {ms} | {speed} |')
    markdown = '\n'.join(lines)
    notes = ('mIoU (probe): linear probe (BN + 1x1 conv) trained on the frozen backbone, val split; students '
             'fine-tuned by distillation for the same number of steps first. search mIoU: the supernet path '
             'with the teacher\'s head, as tools/search.py scored it (teacher: its own head). Latency: DINOv3-B '
             'shapes (768 wide, 12 heads, window 16) at 1024x2048, batch 1, fp32, on this CPU: one block per '
             'mixer timed, summed per arch (jetvit_mm.search.latency.predict_latency).')
    (work / 'results.md').write_text(markdown + '\n\n' + notes + '\n')
    for name in ('pareto_step1.png', 'pareto_step2.png', 'layer_gains_step1.png', 'layer_gains_step2.png'):
        if (search_dir / name).is_file():
            shutil.copy(search_dir / name, work / name)
    if table:
        plot_search(summary, table, rows, teacher, work / 'pareto_dinov3b_1024x2048.png')
    return dict(rows=rows, markdown=markdown, notes=notes, latency_table_ms=table,
                step1_arch=archs.get('step1'), step2_archs=[archs.get(t) for t in ('step1', '1F', '2F')])


def plot_search(summary: dict, table: Dict[str, float], rows: List[dict], teacher: str, path: Path) -> None:
    """Every scored arch: search mIoU vs DINOv3-B latency at 1024x2048, by step, the Pareto front of each step
    and the archs of the table."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
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
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
