"""The demo's pipeline: every step a tool run as a user runs it, the steps that do not depend on each other side by
side, then the latency table and the report."""
import json
import os
import shutil
import time
import warnings
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from jetvit_mm.models.token_reduction import parse_cluster_spec
from jetvit_mm.testing.context_seg import CONTEXT_SEG_SPLITS, TASKS, make_context_seg

from .checkpoints import digest, extract_backbone, last_checkpoint
from .latency import SMALL_MODEL, latency_table
from .paths import DISTILL_CFG, FIXED_CFG, PROBE_CFG, REPO, SMALL_TEACHER_CFG, TEACHER_CFG
from .report import write_report
from .scheduler import Pipeline

DEPTH = 12  # the toy teacher's layers (configs/demo): a searched arch string is also a DINOv3-B arch
DATA_VERSION = 4  # bump when the generator's output changes
# the token-clustering baseline (jetvit_mm.models.token_reduction) at two strengths, tuned so that DINOv3-B at
# 1024x2048 lands near the 2-F hybrid's and the all-L model's speed on the demo's CPU; both give the last two blocks
# full resolution back, as Expedit places its reconstruction (docs/toy_reproduction.md)
CLUSTERINGS = (('cluster_2F', 'f2@1-9'), ('cluster_all_L', 'f3@0-9'))


@dataclass(frozen=True)
class DemoOptions:
    """What ``tools/demo.py`` takes (its flags, with these defaults)."""
    work_dir: Path = REPO / 'work_dirs' / 'demo'
    seed: int = 0
    task: str = 'partner'
    jobs: int = 2
    threads: int = 1
    train_images: int = CONTEXT_SEG_SPLITS['train']
    val_images: int = CONTEXT_SEG_SPLITS['val']
    distill_iters: int = 600
    finetune_iters: int = 300
    probe_iters: Optional[int] = None
    teacher_iters: Optional[int] = None
    beam_width: int = 2
    min_gain: float = 0.1
    latency_threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    latency_repeat: int = 5
    no_latency: bool = False
    ablation: bool = False
    quiet: bool = False

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f'unknown task {self.task!r}; valid: {", ".join(TASKS)}')
        if self.jobs < 1 or self.threads < 1:
            raise ValueError(f'jobs and threads must be >= 1, got jobs={self.jobs}, threads={self.threads}')


def merged_config_text(path: Path) -> str:
    """A config with its bases merged, as sorted JSON: what a cached step trained with, whichever file changed."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)  # mmengine's imports warn about pkg_resources
        from mmengine.config import Config

        return json.dumps(Config.fromfile(path).to_dict(), sort_keys=True, default=str)


def make_data(root: Path, args: 'DemoOptions') -> Path:
    """Generate the dataset unless the same one is already there."""
    stamp = root / 'context_seg.json'
    key = dict(version=DATA_VERSION, seed=args.seed, train=args.train_images, val=args.val_images, task=args.task)
    if stamp.is_file() and json.loads(stamp.read_text()) == key:
        return root
    if root.exists():
        shutil.rmtree(root)
    make_context_seg(root, splits={'train': args.train_images, 'val': args.val_images}, seed=args.seed,
                     task=args.task)
    stamp.write_text(json.dumps(key))
    return root


def cached_teacher(p: Pipeline, tag: str, cfg: Path, out: Path, options: Sequence[str], key: str,
                   priority: int = 0) -> Tuple[Callable[[], Path], bool]:
    """A teacher trained end to end by ``cfg`` in ``out`` unless one trained with the same ``key`` is there: returns
    the step (it returns the runner checkpoint; the backbone is ``out/teacher_backbone.pth``) and whether it is
    cached."""
    backbone, stamp = out / 'teacher_backbone.pth', out / 'teacher.json'
    cached = stamp.is_file() and json.loads(stamp.read_text()).get('key') == key and backbone.is_file()

    def train() -> Path:
        if cached:
            p.log(f'{tag}: cached ({backbone})')
            return last_checkpoint(out)
        if out.exists():
            shutil.rmtree(out)
        p.tool(f'{tag}_train', 'train.py', cfg, '--work-dir', out, '--cfg-options', *options, priority=priority)
        ckpt = last_checkpoint(out)
        extract_backbone(ckpt, 'backbone.', backbone)
        stamp.write_text(json.dumps(dict(key=key, checkpoint=str(ckpt))))
        return ckpt
    return train, cached


def clustering_options(spec: str) -> List[str]:
    """The probe config's backbone as the token-clustering baseline (the teacher's weights, nothing trained)."""
    return ['model.backbone.type=TokenClusteringJetViT', f'model.backbone.clustering={spec}']


def small_probe_options() -> List[str]:
    """The probe config's backbone and head at the smaller teacher's width (read from its config)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        from mmengine.config import Config

        backbone = Config.fromfile(SMALL_TEACHER_CFG).model.backbone
    return [f'model.backbone.embed_dim={backbone.embed_dim}', f'model.backbone.num_heads={backbone.num_heads}',
            f'model.decode_head.in_channels={backbone.embed_dim}']


def run_demo(args: DemoOptions) -> dict:
    """The whole pipeline (see the package docstring); returns the report also written to ``results.json``."""
    start = time.time()
    load_start = os.getloadavg()
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    data = make_data(work / 'data' / 'context_seg', args)
    run_dir = work / 'pipeline'
    if run_dir.exists():
        shutil.rmtree(run_dir)  # everything but the data, the teacher and the latency table is recomputed
    (run_dir / 'logs').mkdir(parents=True)
    p = Pipeline(run_dir / 'logs', args.jobs, args.threads, start, args.quiet)
    p.log(f'data: {data} ({args.task} task, {args.train_images} train / {args.val_images} val images, seed '
          f'{args.seed}); {os.cpu_count()} CPUs, load average {load_start[0]:.2f}')
    roots = [f'{s}_dataloader.dataset.data_root={data}' for s in ('train', 'val', 'test')]
    probe_opts = [f'train_cfg.max_iters={args.probe_iters}', f'train_cfg.val_interval={args.probe_iters}'] \
        if args.probe_iters else []

    # ---- teacher (cached)
    teacher_dir = work / 'teacher'
    teacher_backbone = teacher_dir / 'teacher_backbone.pth'
    teacher_opts = [*roots, f'train_cfg.max_iters={args.teacher_iters}',
                    f'train_cfg.val_interval={args.teacher_iters}'] if args.teacher_iters else roots
    teacher, cached = cached_teacher(p, 'teacher', TEACHER_CFG, teacher_dir, teacher_opts, digest(
        merged_config_text(TEACHER_CFG), args.teacher_iters, data / 'context_seg.json'))
    t_teacher = p.submit(teacher)

    def probe(tag: str, arch: str, backbone: Path, priority: int = 2, extra: Sequence[str] = ()) -> float:
        """Linear probe on the frozen backbone: tools/train.py, then tools/test.py; returns the mIoU. ``extra``:
        more cfg-options of the backbone (the alternatives' type, clustering or width)."""
        out = run_dir / f'probe_{tag}'
        p.tool(f'probe_{tag}', 'train.py', PROBE_CFG, '--work-dir', out, '--cfg-options', *roots, *probe_opts,
               f'model.backbone.arch={arch}', f'model.backbone.checkpoint={backbone}', *extra, priority=priority)
        metrics = out / 'metrics.json'
        p.tool(f'test_{tag}', 'test.py', PROBE_CFG, last_checkpoint(out), '--work-dir', out / 'test',
               '--out', metrics, '--cfg-options', *roots, f'model.backbone.arch={arch}', *extra, priority=priority)
        return json.loads(metrics.read_text())['mIoU']

    def finetune_and_probe(tag: str, arch: str, finetune_cfg: Path, priority: int = 2) -> float:
        out = run_dir / f'finetune_{tag}'
        p.tool(f'finetune_{tag}', 'train.py', finetune_cfg, '--work-dir', out, '--cfg-options', roots[0],
               f'model.teacher.checkpoint={teacher_backbone}', f'train_cfg.max_iters={args.finetune_iters}',
               priority=priority)
        return probe(tag, arch, last_checkpoint(out), priority)  # the student of a runner checkpoint loads as is

    results: Dict[str, Future] = {}
    archs: Dict[str, str] = {'teacher': 'F' * DEPTH}
    results['teacher'] = p.submit(lambda: probe('teacher', 'F' * DEPTH, teacher_backbone), t_teacher)

    # ---- Step 1: {L, W} supernet, search
    search_dir = run_dir / 'search'
    distill = ['--cfg-options', roots[0], f'model.teacher.checkpoint={teacher_backbone}',
               f'train_cfg.max_iters={args.distill_iters}']

    def search(*extra) -> list:
        return [*extra, '--head-checkpoint', t_teacher.result(), '--work-dir', search_dir, '--beam-width',
                args.beam_width, '--device', 'cpu', '--cfg-options', roots[1]]

    # the search's own latency table (toy model, val size) breaks ties between equal scores: keep the first
    # run's, so that a rerun makes the same choices
    toy_latency = work / 'latency_toy_search.json'

    def step1() -> str:
        with p.hold(priority=0):
            p.tool('step1_distill', 'train.py', DISTILL_CFG, '--work-dir', run_dir / 'step1', *distill)
            if toy_latency.is_file():
                search_dir.mkdir(parents=True, exist_ok=True)
                shutil.copy(toy_latency, search_dir / 'latency_table.json')
            p.tool('step1_search', 'search.py', PROBE_CFG, last_checkpoint(run_dir / 'step1'),
                   *search('--stage', 1, '--min-gain', args.min_gain))
        if not toy_latency.is_file():
            shutil.copy(search_dir / 'latency_table.json', toy_latency)
        return (search_dir / 'best_arch_step1.txt').read_text().strip()

    t_step1 = p.submit(step1, t_teacher)

    def export(tag: str, supernet_dir: Path, arch: str, priority: int = 2) -> Path:
        out = run_dir / f'export_{tag}'
        p.tool(f'export_{tag}', 'export_hybrid.py', PROBE_CFG, last_checkpoint(supernet_dir), '--arch', arch,
               '--out-dir', out, '--distill-config', DISTILL_CFG, priority=priority)
        return out / f'finetune_{arch}.py'

    def step1_row(tag: str, arch_of: Callable[[], str]) -> float:
        arch = arch_of()
        archs[tag] = arch
        return finetune_and_probe(tag, arch, export(tag, run_dir / 'step1', arch))

    results['all_L'] = p.submit(lambda: step1_row('all_L', lambda: 'L' * DEPTH), t_step1)
    results['all_W'] = p.submit(lambda: step1_row('all_W', lambda: 'W' * DEPTH), t_step1)
    results['step1'] = p.submit(lambda: step1_row('step1', t_step1.result), t_step1)

    # ---- Step 2: {winner, F} supernet, search to 2 F layers, export
    def step2() -> List[str]:
        best1 = t_step1.result()
        with p.hold(priority=0):
            p.tool('step2_distill', 'train.py', DISTILL_CFG, '--work-dir', run_dir / 'step2', *distill,
                   'model.student.search_space=None', f'model.student.step1_arch={best1}')
            # --tolerance -100: never stop early on the teacher's score: the table shows the 1- and 2-F hybrids
            p.tool('step2_search', 'search.py', PROBE_CFG, last_checkpoint(run_dir / 'step2'),
                   *search('--stage', 2, '--step1-arch', best1, '--max-full', 2, '--tolerance', -100, '--export',
                           '--distill-config', DISTILL_CFG))
        state = json.loads((search_dir / 'search_state.json').read_text())
        bests = state['stages']['2']['stages'][0]  # best arch of each stage: 0, 1, 2 F layers
        if len(bests) != 3 or [a.count('F') for a in bests] != [0, 1, 2]:
            raise RuntimeError(f'step 2 search stages {bests}: expected 0, 1 and 2 F layers')
        return bests

    t_step2 = p.submit(step2, t_step1)

    def step2_row(tag: str, n_full: int) -> float:
        arch = t_step2.result()[n_full]
        archs[tag] = arch
        if n_full == 2:
            cfg = search_dir / f'finetune_{arch}.py'  # written by the search's --export
        else:
            cfg = export(tag, run_dir / 'step2', arch, priority=1)
        return finetune_and_probe(tag, arch, cfg, priority=1)

    results['1F'] = p.submit(lambda: step2_row('1F', 1), t_step2)
    results['2F'] = p.submit(lambda: step2_row('2F', 2), t_step2)

    # ---- what a user would pick instead: the teacher with training-free token clustering (no training: probed
    # as is), and a smaller teacher trained with the teacher's recipe and steps (cached as the teacher)
    for tag, spec in CLUSTERINGS:
        archs[tag] = 'F' * DEPTH
        results[tag] = p.submit(
            lambda t=tag, s=spec: probe(t, 'F' * DEPTH, teacher_backbone, 3, clustering_options(s)), t_teacher)
    small_dir = work / 'teacher_small'
    small_teacher, small_cached = cached_teacher(
        p, 'teacher_small', SMALL_TEACHER_CFG, small_dir, teacher_opts,
        digest(merged_config_text(SMALL_TEACHER_CFG), args.teacher_iters, data / 'context_seg.json'), priority=3)
    t_small = p.submit(small_teacher)
    archs['teacher_small'] = 'F' * DEPTH
    results['teacher_small'] = p.submit(
        lambda: probe('teacher_small', 'F' * DEPTH, small_dir / 'teacher_backbone.pth', 3, small_probe_options()),
        t_small)

    # ---- the weight-inheritance comparison (optional)
    if args.ablation:
        def inherit(mode: str) -> float:
            out = run_dir / f'inherit_{mode}'
            p.tool(f'inherit_{mode}_distill', 'train.py', FIXED_CFG, '--work-dir', out, *distill,
                   f'model.student.inherit={mode}', priority=3)
            arch = 'L' * DEPTH
            return probe(f'inherit_{mode}', arch, last_checkpoint(out), priority=3)

        for mode in ('all', 'mlp'):
            archs[f'inherit_{mode}'] = 'L' * DEPTH
            results[f'inherit_{mode}'] = p.submit(lambda m=mode: inherit(m), t_teacher)

    try:
        miou = {tag: future.result() for tag, future in results.items()}
    finally:
        p.pool.shutdown(wait=True, cancel_futures=True)
    pipeline_s = time.time() - start

    # ---- latency at 1024x2048 (alone on the machine: after every other step), and the table
    table = None
    if not args.no_latency:
        began = time.time()
        table = latency_table(work / 'latency_dinov3b_1024x2048.json', args.latency_threads, args.latency_repeat,
                              clusterings=[parse_cluster_spec(s, DEPTH) for _, s in CLUSTERINGS],
                              small_model=SMALL_MODEL)
        p.log(f'latency table (DINOv3-B, 1024x2048): {time.time() - began:.0f} s')
    summary = json.loads((search_dir / 'search.json').read_text())
    report = write_report(work, search_dir, summary, archs, miou, table,
                          {tag: parse_cluster_spec(s, DEPTH) for tag, s in CLUSTERINGS})
    total = time.time() - start
    load_end = os.getloadavg()
    report.update(seconds=dict(total=round(total, 1), pipeline=round(pipeline_s, 1),
                               steps={k: round(v, 1) for k, v in p.timings.items()}),
                  machine=dict(cpus=os.cpu_count(), loadavg_start=load_start, loadavg_end=load_end),
                  teacher_cached=cached, small_teacher_cached=small_cached,
                  args={k: str(v) for k, v in asdict(args).items()})
    (work / 'results.json').write_text(json.dumps(report, indent=2))
    line = (f'demo: {total:.0f} s in all ({os.cpu_count()} CPUs, load average {load_start[0]:.2f} at the start, '
            f'{load_end[0]:.2f} at the end; teacher {"cached" if cached else "trained"})')
    with open(work / 'results.md', 'a') as f:
        f.write('\n' + line + '\n')
    print(report['markdown'])
    print(f'\n{line}; outputs in {work}')
    return report
