"""The demo: the whole JetViT method on CPU on a generated task where global context matters, as a task
configuration of the method's stages (:mod:`jetvit_mm.pipeline.stages`), with its own stages after the method's
(the rows of its table, the alternatives, the ablation), the latency table and its report. What it runs and writes:
``tools/demo.py``'s help."""
import json
import os
import shutil
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from jetvit_mm.models.token_reduction import parse_cluster_spec
from jetvit_mm.pipeline.engine import Workflow
from jetvit_mm.pipeline.inputs import CONFIG_LOCK
from jetvit_mm.pipeline.stage import Arg, FileText, Join, Stage, python_tool
from jetvit_mm.pipeline.stages import (
    REPO,
    MethodOptions,
    StageBuilder,
    TaskProfile,
    loader_roots,
    method_stages,
    plan_text,
)

from .context_seg import CONTEXT_SEG_SPLITS, TASKS, make_context_seg
from .latency import SMALL_MODEL, latency_table
from .report import write_report

CONFIGS = REPO / 'configs' / 'demo'
TEACHER_CFG = CONFIGS / 'teacher_context_seg.py'
SMALL_TEACHER_CFG = CONFIGS / 'teacher_small_context_seg.py'
PROBE_CFG = CONFIGS / 'probe_context_seg.py'
DISTILL_CFG = CONFIGS / 'distill_supernet_context_seg.py'
FIXED_CFG = CONFIGS / 'distill_fixed_context_seg.py'
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
        from jetvit_mm.mm.engine.launch import read_config

        with CONFIG_LOCK:  # mmengine's config reader is not thread-safe (the stages run in threads)
            backbone = read_config(str(SMALL_TEACHER_CFG)).model.backbone
    return [f'model.backbone.embed_dim={backbone.embed_dim}', f'model.backbone.num_heads={backbone.num_heads}',
            f'model.decode_head.in_channels={backbone.embed_dim}']


def method_options(args: DemoOptions, data: Path) -> MethodOptions:
    """The demo as a task of the method: its configs, data and iterations; the search on CPU, Step 1 with its
    plateau and the latency table of the first run (ties are broken alike in a rerun), Step 2 never stopping early
    on the teacher's score (the table shows the 1- and 2-F hybrids)."""
    work = args.work_dir.resolve() / 'pipeline'
    profile = TaskProfile('seg', PROBE_CFG, 'mIoU', teacher_config=TEACHER_CFG)
    iterations = dict(teacher=args.teacher_iters, probe=args.probe_iters, distill=args.distill_iters,
                      finetune=args.finetune_iters)
    return MethodOptions(DISTILL_CFG, work / 'teacher_backbone' / 'teacher_backbone.pth', work, profile, data,
                         beam_width=args.beam_width, device='cpu',
                         iterations={k: v for k, v in iterations.items() if v is not None},
                         search_flags={1: ('--min-gain', args.min_gain), 2: ('--tolerance', -100)},
                         search_latency=args.work_dir.resolve() / 'latency_toy_search.json')


def probe_stages(b: StageBuilder, tag: str, arch: Arg, backbone: Arg, deps: Sequence[str],
                 extra: Sequence[str] = ()) -> List[Stage]:
    """Linear probe on the frozen backbone (``probe_<tag>``) and its test (``test_<tag>``); ``extra``: more
    cfg-options of the backbone (the alternatives' type, clustering or width)."""
    arch_opt = Join('model.backbone.arch=', arch)
    return [b.train(f'probe_{tag}', PROBE_CFG, [*loader_roots(PROBE_CFG, b.o.data_root), arch_opt,
                                                Join('model.backbone.checkpoint=', backbone), *extra],
                    deps, PROBE_CFG, 'probe', has_val=True),
            b.test(f'test_{tag}', PROBE_CFG, b.last(f'probe_{tag}'), [arch_opt, *extra], [f'probe_{tag}'])]


def row_stages(b: StageBuilder, tag: str, arch: Arg, supernet: str, deps: Sequence[str]) -> List[Stage]:
    """A row of the table: ``arch`` exported from the ``supernet`` stage's checkpoint, fine-tuned by its exported
    ``finetune_<ARCH>.py`` and probed."""
    out = b.w / f'export_{tag}'
    export = Stage(f'export_{tag}', out, python_tool(REPO, 'export_hybrid.py', PROBE_CFG, b.last(supernet), '--arch',
                                                      arch, '--out-dir', out, '--distill-config', DISTILL_CFG),
                   deps=[supernet, *deps], products=('hybrid_*.pth', 'finetune_*.py'))
    finetune = b.train(f'finetune_{tag}', Join(out / 'finetune_', arch, '.py'),
                       [*loader_roots(DISTILL_CFG, b.o.data_root, ('train', )),
                        f'model.teacher.checkpoint={b.o.teacher}'], [f'export_{tag}'], DISTILL_CFG, 'finetune')
    return [export, finetune, *probe_stages(b, tag, arch, b.last(f'finetune_{tag}'), [f'finetune_{tag}'])]


def write_step2_archs(search: Path, out: Path) -> None:
    """``arch_<N>F.txt``: Step 2's best arch with 0, 1 and 2 F layers (its search stages)."""
    bests = json.loads((search / 'search_state.json').read_text())['stages']['2']['stages'][0]
    if len(bests) != 3 or [a.count('F') for a in bests] != [0, 1, 2]:
        raise RuntimeError(f'step 2 search stages {bests}: expected 0, 1 and 2 F layers')
    for n, arch in enumerate(bests):
        (out / f'arch_{n}F.txt').write_text(arch + '\n')


def demo_stages(args: DemoOptions, data: Path) -> List[Stage]:
    """The method's stages, then the demo's own (see the module docstring)."""
    b = StageBuilder(method_options(args, data))
    w, teacher = b.w, b.o.teacher
    archs = Stage('step2_archs', w / 'step2_archs', ['step2_archs', w / 'step2_search' / 'search_state.json'],
                  deps=['step2_search'], products=('arch_*.txt', ),
                  action=lambda s: write_step2_archs(w / 'step2_search', s.out_dir))
    stages = [*method_stages(b.o), archs]
    for tag, arch, supernet, deps in (
            ('all_L', 'L' * DEPTH, 'step1_distill', []), ('all_W', 'W' * DEPTH, 'step1_distill', []),
            ('step1', FileText(w / 'step1_search' / 'best_arch_step1.txt'), 'step1_distill', ['step1_search']),
            ('1F', FileText(w / 'step2_archs' / 'arch_1F.txt'), 'step2_distill', ['step2_archs'])):
        stages += row_stages(b, tag, arch, supernet, deps)
    for tag, spec in CLUSTERINGS:
        stages += probe_stages(b, tag, 'F' * DEPTH, teacher, ['teacher_backbone'], clustering_options(spec))
    stages += b.teacher('teacher_small', SMALL_TEACHER_CFG)
    stages += probe_stages(b, 'teacher_small', 'F' * DEPTH, w / 'teacher_small_backbone' / 'teacher_backbone.pth',
                           ['teacher_small_backbone'], small_probe_options())
    for mode in ('all', 'mlp') if args.ablation else ():
        stages.append(b.train(f'inherit_{mode}', FIXED_CFG, [*loader_roots(FIXED_CFG, data, ('train', )),
                                                            f'model.teacher.checkpoint={teacher}',
                                                            f'model.student.inherit={mode}'],
                              ['teacher_backbone'], FIXED_CFG, 'distill'))
        stages += probe_stages(b, f'inherit_{mode}', 'L' * DEPTH, b.last(f'inherit_{mode}'), [f'inherit_{mode}'])
    return stages


# the rows of the table that are the method's own stages: their test stage (the others': test_<tag>)
ROW_TESTS = dict(teacher='test_teacher', **{'2F': 'test_hybrid'})


def row_archs(w: Path) -> Dict[str, str]:
    """The arch of each row of the table, by tag."""
    def read(*parts: str) -> str:
        return w.joinpath(*parts).read_text().strip()
    return dict(teacher='F' * DEPTH, all_L='L' * DEPTH, all_W='W' * DEPTH,
                step1=read('step1_search', 'best_arch_step1.txt'),
                **{'1F': read('step2_archs', 'arch_1F.txt'), '2F': read('step2_search', 'best_arch_step2.txt')},
                **{tag: 'F' * DEPTH for tag, _ in CLUSTERINGS}, teacher_small='F' * DEPTH,
                inherit_all='L' * DEPTH, inherit_mlp='L' * DEPTH)


def plan_demo(args: DemoOptions) -> str:
    """Every stage the demo would run, its command and whether it would be skipped; runs nothing."""
    work = args.work_dir.resolve()
    stages = demo_stages(args, work / 'data' / 'context_seg')
    return plan_text(Workflow(work / 'pipeline', log=lambda m: None), stages, {})


def run_demo(args: DemoOptions) -> dict:
    """The demo's stages (``--jobs`` at a time where they do not depend on each other), then the latency table at
    1024x2048 (alone on the machine: after every other step) and ``results.md``/``.json``; returns the report."""
    start, load_start = time.time(), os.getloadavg()
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    log = (lambda m: None) if args.quiet else (lambda m: print(f'[{time.time() - start:6.0f} s] {m}', flush=True))
    data = make_data(work / 'data' / 'context_seg', args)
    log(f'data: {data} ({args.task} task, {args.train_images} train / {args.val_images} val images, seed '
        f'{args.seed}); {os.cpu_count()} CPUs, load average {load_start[0]:.2f}')
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               PYTHONUNBUFFERED='1', PYTHONWARNINGS='ignore')
    wf = Workflow(work / 'pipeline', cwd=REPO, env=env, log=log)  # kept between runs: what is done is skipped
    with wf.lock():
        wf.run_all(demo_stages(args, data), jobs=args.jobs)
    cached = {tag: tag not in wf.timings for tag in ('teacher', 'teacher_small')}
    for tag in (t for t, c in cached.items() if c):
        log(f'{tag}: cached ({wf.work_dir / tag})')
    toy_latency = work / 'latency_toy_search.json'
    if not toy_latency.is_file():
        shutil.copy(wf.work_dir / 'step1_search' / 'latency_table.json', toy_latency)
    archs = {t: a for t, a in row_archs(wf.work_dir).items() if args.ablation or not t.startswith('inherit')}
    miou = {t: json.loads((wf.work_dir / ROW_TESTS.get(t, f'test_{t}') / 'metrics.json').read_text())['mIoU']
            for t in archs}
    return report(args, wf, archs, miou, cached, start, load_start)


def report(args: DemoOptions, wf: Workflow, archs: Dict[str, str], miou: Dict[str, float], cached: Dict[str, bool],
           start: float, load_start: tuple) -> dict:
    """The latency table at 1024x2048, results.md/.json."""
    work, run_dir, pipeline_s = args.work_dir.resolve(), wf.work_dir, time.time() - start
    table = None
    if not args.no_latency:
        began = time.time()
        table = latency_table(work / 'latency_dinov3b_1024x2048.json', args.latency_threads,
                              args.latency_repeat, clusterings=[parse_cluster_spec(s, DEPTH) for _, s in
                                                                CLUSTERINGS], small_model=SMALL_MODEL)
        wf.log(f'latency table (DINOv3-B, 1024x2048): {time.time() - began:.0f} s')
    search_dir = run_dir / 'step2_search'  # its state holds both steps' archs
    for name in ('pareto_step1.png', 'layer_gains_step1.png'):
        shutil.copy(run_dir / 'step1_search' / name, work / name)
    summary = json.loads((search_dir / 'search.json').read_text())
    result = write_report(work, search_dir, summary, archs, miou, table,
                          {tag: parse_cluster_spec(s, DEPTH) for tag, s in CLUSTERINGS})
    total, load_end = time.time() - start, os.getloadavg()
    result.update(seconds=dict(total=round(total, 1), pipeline=round(pipeline_s, 1),
                               steps={k: round(v, 1) for k, v in wf.timings.items()}),
                  machine=dict(cpus=os.cpu_count(), loadavg_start=load_start, loadavg_end=load_end),
                  teacher_cached=cached['teacher'], small_teacher_cached=cached['teacher_small'],
                  args={k: str(v) for k, v in asdict(args).items()})
    (work / 'results.json').write_text(json.dumps(result, indent=2))
    line = (f'demo: {total:.0f} s in all ({os.cpu_count()} CPUs, load average {load_start[0]:.2f} at the '
            f'start, {load_end[0]:.2f} at the end; teacher {"cached" if cached["teacher"] else "trained"})')
    with open(work / 'results.md', 'a') as f:
        f.write('\n' + line + '\n')
    print(result['markdown'])
    print(f'\n{line}; outputs in {work}')
    return result
