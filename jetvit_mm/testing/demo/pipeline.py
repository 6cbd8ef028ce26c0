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
from typing import Callable, Dict, List, Optional, Sequence

from jetvit_mm.mm.workflow import CONFIG_LOCK, Stage
from jetvit_mm.models.token_reduction import parse_cluster_spec
from jetvit_mm.testing.context_seg import CONTEXT_SEG_SPLITS, TASKS, make_context_seg

from .checkpoints import extract_backbone, last_checkpoint
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


def clustering_options(spec: str) -> List[str]:
    """The probe config's backbone as the token-clustering baseline (the teacher's weights, nothing trained)."""
    return ['model.backbone.type=TokenClusteringJetViT', f'model.backbone.clustering={spec}']


def small_probe_options() -> List[str]:
    """The probe config's backbone and head at the smaller teacher's width (read from its config)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        from mmengine.config import Config

        with CONFIG_LOCK:  # mmengine's config reader is not thread-safe (the demo's steps run in threads)
            backbone = Config.fromfile(SMALL_TEACHER_CFG).model.backbone
    return [f'model.backbone.embed_dim={backbone.embed_dim}', f'model.backbone.num_heads={backbone.num_heads}',
            f'model.decode_head.in_channels={backbone.embed_dim}']


class DemoRun:
    """The demo's steps (see the package docstring), each a method submitting workflow stages to the scheduler:
    the steps that do not depend on each other run side by side; a rerun in the same work dir skips every stage
    done with the same inputs and resumes a killed one."""

    def __init__(self, args: DemoOptions) -> None:
        self.args, self.start, self.load_start = args, time.time(), os.getloadavg()
        self.work = args.work_dir.resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        self.data = make_data(self.work / 'data' / 'context_seg', args)
        self.run_dir = self.work / 'pipeline'  # kept between runs: the workflow skips what is done
        self.p = Pipeline(self.run_dir / 'logs', args.jobs, args.threads, self.start, args.quiet,
                          inputs=[self.data / 'context_seg.json'])
        self.p.log(f'data: {self.data} ({args.task} task, {args.train_images} train / {args.val_images} val images, '
                   f'seed {args.seed}); {os.cpu_count()} CPUs, load average {self.load_start[0]:.2f}')
        self.roots = [f'{s}_dataloader.dataset.data_root={self.data}' for s in ('train', 'val', 'test')]
        self.probe_opts = [f'train_cfg.max_iters={args.probe_iters}', f'train_cfg.val_interval={args.probe_iters}'] \
            if args.probe_iters else []
        self.distill = ['--cfg-options', self.roots[0], f'model.teacher.checkpoint={self.teacher_backbone}',
                        f'train_cfg.max_iters={args.distill_iters}']
        self.results: Dict[str, Future] = {}
        self.archs: Dict[str, str] = {'teacher': 'F' * DEPTH}
        self.cached: Dict[str, bool] = {}

    @property
    def teacher_backbone(self) -> Path:
        return self.work / 'teacher_backbone' / 'teacher_backbone.pth'

    def teacher(self, tag: str, cfg: Path, priority: int = 0) -> Future:
        """A teacher trained end to end by ``cfg`` in ``work/<tag>`` and its backbone cut out into
        ``work/<tag>_backbone/teacher_backbone.pth``, both skipped when done with the same inputs."""
        args = self.args
        out = self.work / tag
        options = [*self.roots, f'train_cfg.max_iters={args.teacher_iters}',
                   f'train_cfg.val_interval={args.teacher_iters}'] if args.teacher_iters else self.roots

        def train() -> Path:
            ran = self.p.tool(f'{tag}_train', 'train.py', cfg, '--work-dir', out, '--cfg-options', *options,
                              priority=priority, out=out, resume=True)
            self.cached[tag] = not ran
            if not ran:
                self.p.log(f'{tag}: cached ({out})')
            ckpt = last_checkpoint(out)
            backbone = self.work / f'{tag}_backbone' / 'teacher_backbone.pth'
            self.p.run_stage(Stage(f'{tag}_backbone', backbone.parent, ['extract_backbone', ckpt, 'backbone.'],
                                   action=lambda s: extract_backbone(ckpt, 'backbone.', backbone)))
            return ckpt
        return self.p.submit(train)

    def probe(self, tag: str, arch: str, backbone: Path, priority: int = 2, extra: Sequence[str] = ()) -> float:
        """Linear probe on the frozen backbone: tools/train.py, then tools/test.py; returns the mIoU. ``extra``:
        more cfg-options of the backbone (the alternatives' type, clustering or width)."""
        out, test = self.run_dir / f'probe_{tag}', self.run_dir / f'test_{tag}'
        self.p.tool(f'probe_{tag}', 'train.py', PROBE_CFG, '--work-dir', out, '--cfg-options', *self.roots,
                    *self.probe_opts, f'model.backbone.arch={arch}', f'model.backbone.checkpoint={backbone}', *extra,
                    priority=priority, resume=True)
        metrics = test / 'metrics.json'
        self.p.tool(f'test_{tag}', 'test.py', PROBE_CFG, last_checkpoint(out), '--work-dir', test, '--out', metrics,
                    '--cfg-options', *self.roots, f'model.backbone.arch={arch}', *extra, priority=priority)
        return json.loads(metrics.read_text())['mIoU']

    def finetune_and_probe(self, tag: str, arch: str, finetune_cfg: Path, priority: int = 2) -> float:
        out = self.run_dir / f'finetune_{tag}'
        self.p.tool(f'finetune_{tag}', 'train.py', finetune_cfg, '--work-dir', out, '--cfg-options', self.roots[0],
                    f'model.teacher.checkpoint={self.teacher_backbone}',
                    f'train_cfg.max_iters={self.args.finetune_iters}', priority=priority, resume=True)
        return self.probe(tag, arch, last_checkpoint(out), priority)  # a runner checkpoint's student loads as is

    def export(self, tag: str, supernet_dir: Path, arch: str, priority: int = 2) -> Path:
        out = self.run_dir / f'export_{tag}'
        self.p.tool(f'export_{tag}', 'export_hybrid.py', PROBE_CFG, last_checkpoint(supernet_dir), '--arch', arch,
                    '--out-dir', out, '--distill-config', DISTILL_CFG, priority=priority)
        return out / f'finetune_{arch}.py'

    def search(self, step: int, *extra) -> list:
        return ['--stage', step, *extra, '--head-checkpoint', self.t_teacher.result(), '--work-dir',
                self.run_dir / f'step{step}_search', '--beam-width', self.args.beam_width, '--device', 'cpu',
                '--cfg-options', self.roots[1]]

    def step1(self) -> str:
        """Step-1 supernet distillation and search; returns the best arch. The search's own latency table (toy
        model, val size) breaks ties between equal scores: the first run's is kept, so a rerun chooses the same."""
        toy_latency, search_dir = self.work / 'latency_toy_search.json', self.run_dir / 'step1_search'
        with self.p.hold(priority=0):
            self.p.tool('step1_distill', 'train.py', DISTILL_CFG, '--work-dir', self.run_dir / 'step1_distill',
                        *self.distill, resume=True)
            self.p.tool('step1_search', 'search.py', PROBE_CFG, last_checkpoint(self.run_dir / 'step1_distill'),
                        *self.search(1, '--min-gain', self.args.min_gain),
                        copy_in=[(toy_latency, 'latency_table.json')])
        if not toy_latency.is_file():
            shutil.copy(search_dir / 'latency_table.json', toy_latency)
        return (search_dir / 'best_arch_step1.txt').read_text().strip()

    def step1_rows(self) -> None:
        def row(tag: str, arch_of: Callable[[], str]) -> float:
            arch = arch_of()
            self.archs[tag] = arch
            return self.finetune_and_probe(tag, arch, self.export(tag, self.run_dir / 'step1_distill', arch))

        for tag, arch_of in (('all_L', lambda: 'L' * DEPTH), ('all_W', lambda: 'W' * DEPTH),
                             ('step1', self.t_step1.result)):
            self.results[tag] = self.p.submit(lambda t=tag, a=arch_of: row(t, a), self.t_step1)

    def step2(self) -> List[str]:
        """Step 2: {winner, F} supernet, search to 2 F layers, export; returns the best arch with 0, 1, 2 F."""
        best1, s1 = self.t_step1.result(), self.run_dir / 'step1_search'
        with self.p.hold(priority=0):
            self.p.tool('step2_distill', 'train.py', DISTILL_CFG, '--work-dir', self.run_dir / 'step2_distill',
                        *self.distill, 'model.student.search_space=None', f'model.student.step1_arch={best1}',
                        resume=True)
            # --tolerance -100: never stop early on the teacher's score: the table shows the 1- and 2-F hybrids
            self.p.tool('step2_search', 'search.py', PROBE_CFG, last_checkpoint(self.run_dir / 'step2_distill'),
                        *self.search(2, '--step1-arch', best1, '--max-full', 2, '--tolerance', -100, '--export',
                                     '--distill-config', DISTILL_CFG),
                        copy_in=[(s1 / n, n) for n in ('search_state.json', 'latency_table.json')])
        state = json.loads((self.run_dir / 'step2_search' / 'search_state.json').read_text())
        bests = state['stages']['2']['stages'][0]  # best arch of each stage: 0, 1, 2 F layers
        if len(bests) != 3 or [a.count('F') for a in bests] != [0, 1, 2]:
            raise RuntimeError(f'step 2 search stages {bests}: expected 0, 1 and 2 F layers')
        return bests

    def step2_rows(self) -> None:
        def row(tag: str, n_full: int) -> float:
            arch = self.t_step2.result()[n_full]
            self.archs[tag] = arch
            if n_full == 2:
                cfg = self.run_dir / 'step2_search' / f'finetune_{arch}.py'  # written by the search's --export
            else:
                cfg = self.export(tag, self.run_dir / 'step2_distill', arch, priority=1)
            return self.finetune_and_probe(tag, arch, cfg, priority=1)

        for tag, n_full in (('1F', 1), ('2F', 2)):
            self.results[tag] = self.p.submit(lambda t=tag, n=n_full: row(t, n), self.t_step2)

    def alternatives(self) -> None:
        """What a user would pick instead: the teacher with training-free token clustering (probed as is), and a
        smaller teacher trained with the teacher's recipe and steps."""
        for tag, spec in CLUSTERINGS:
            self.archs[tag] = 'F' * DEPTH
            self.results[tag] = self.p.submit(lambda t=tag, s=spec: self.probe(
                t, 'F' * DEPTH, self.teacher_backbone, 3, clustering_options(s)), self.t_teacher)
        t_small = self.teacher('teacher_small', SMALL_TEACHER_CFG, priority=3)
        self.archs['teacher_small'] = 'F' * DEPTH
        small = self.work / 'teacher_small_backbone' / 'teacher_backbone.pth'
        self.results['teacher_small'] = self.p.submit(
            lambda: self.probe('teacher_small', 'F' * DEPTH, small, 3, small_probe_options()), t_small)

    def ablation(self) -> None:
        """The weight-inheritance comparison: all-L distilled with every teacher weight vs the MLPs only."""
        def inherit(mode: str) -> float:
            out = self.run_dir / f'inherit_{mode}'
            self.p.tool(f'inherit_{mode}', 'train.py', FIXED_CFG, '--work-dir', out, *self.distill,
                        f'model.student.inherit={mode}', priority=3, resume=True)
            return self.probe(f'inherit_{mode}', 'L' * DEPTH, last_checkpoint(out), priority=3)

        for mode in ('all', 'mlp'):
            self.archs[f'inherit_{mode}'] = 'L' * DEPTH
            self.results[f'inherit_{mode}'] = self.p.submit(lambda m=mode: inherit(m), self.t_teacher)

    def submit_all(self) -> Dict[str, float]:
        """Every step, side by side where they do not depend on each other; returns the probe mIoU per row."""
        self.t_teacher = self.teacher('teacher', TEACHER_CFG)
        self.results['teacher'] = self.p.submit(
            lambda: self.probe('teacher', 'F' * DEPTH, self.teacher_backbone), self.t_teacher)
        self.t_step1 = self.p.submit(self.step1, self.t_teacher)
        self.step1_rows()
        self.t_step2 = self.p.submit(self.step2, self.t_step1)
        self.step2_rows()
        self.alternatives()
        if self.args.ablation:
            self.ablation()
        try:
            return {tag: future.result() for tag, future in self.results.items()}
        finally:
            self.p.pool.shutdown(wait=True, cancel_futures=True)

    def report(self, miou: Dict[str, float]) -> dict:
        """The latency table at 1024x2048 (alone on the machine: after every other step), results.md/.json."""
        args, work, pipeline_s = self.args, self.work, time.time() - self.start
        table = None
        if not args.no_latency:
            began = time.time()
            table = latency_table(work / 'latency_dinov3b_1024x2048.json', args.latency_threads,
                                  args.latency_repeat, clusterings=[parse_cluster_spec(s, DEPTH) for _, s in
                                                                    CLUSTERINGS], small_model=SMALL_MODEL)
            self.p.log(f'latency table (DINOv3-B, 1024x2048): {time.time() - began:.0f} s')
        search_dir = self.run_dir / 'step2_search'  # its state holds both steps' archs
        for name in ('pareto_step1.png', 'layer_gains_step1.png'):
            shutil.copy(self.run_dir / 'step1_search' / name, work / name)
        summary = json.loads((search_dir / 'search.json').read_text())
        report = write_report(work, search_dir, summary, self.archs, miou, table,
                              {tag: parse_cluster_spec(s, DEPTH) for tag, s in CLUSTERINGS})
        total, load_end = time.time() - self.start, os.getloadavg()
        report.update(seconds=dict(total=round(total, 1), pipeline=round(pipeline_s, 1),
                                   steps={k: round(v, 1) for k, v in self.p.timings.items()}),
                      machine=dict(cpus=os.cpu_count(), loadavg_start=self.load_start, loadavg_end=load_end),
                      teacher_cached=self.cached['teacher'], small_teacher_cached=self.cached['teacher_small'],
                      args={k: str(v) for k, v in asdict(args).items()})
        (work / 'results.json').write_text(json.dumps(report, indent=2))
        line = (f'demo: {total:.0f} s in all ({os.cpu_count()} CPUs, load average {self.load_start[0]:.2f} at the '
                f'start, {load_end[0]:.2f} at the end; teacher {"cached" if self.cached["teacher"] else "trained"})')
        with open(work / 'results.md', 'a') as f:
            f.write('\n' + line + '\n')
        print(report['markdown'])
        print(f'\n{line}; outputs in {work}')
        return report


def run_demo(args: DemoOptions) -> dict:
    """The whole pipeline (see the package docstring); returns the report also written to ``results.json``."""
    run = DemoRun(args)
    with run.p.workflow.lock():
        return run.report(run.submit_all())
