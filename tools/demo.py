"""The embedded default: the whole JetViT pipeline on CPU, on a generated task where global context matters.

    python tools/demo.py [--work-dir work_dirs/demo] [--jobs 2] [--ablation]

1. generate the context task (``jetvit_mm.datasets.context_seg``, Cityscapes layout, 64x128 images, 512 train /
   128 val): an object's class depends on the colour of its partner patch half the image away, outside the
   object's attention window (``--task corner``: one marker in a corner decides every object's class);
2. train a 12-layer DINOv3-architecture teacher (``JetViT``, all full attention, RoPE, registers) with a linear
   head on it, end to end (``configs/demo/teacher_context_seg.py``), cached in the work dir;
3. Step-1 supernet distillation ({L, W} per layer) -> ``tools/search.py --stage 1`` -> Step-2 supernet
   ({winner, F}) -> ``tools/search.py --stage 2 --export`` (0, 1, 2 F layers);
4. export the archs of the table (``tools/export_hybrid.py``), fine-tune each with its exported
   ``finetune_<ARCH>.py`` for the same number of steps, then a linear probe on the frozen backbone
   (``configs/demo/probe_context_seg.py``: ``tools/train.py`` + ``tools/test.py``) of the teacher, all-L,
   all-W, the Step-1 hybrid and the 1- and 2-F hybrids;
5. latency of the same archs at 1024x2048 with DINOv3-B shapes on this machine: one block of each mixer timed
   (batch 1, fp32, interleaved rounds, median), summed per arch (``jetvit_mm.search.latency.predict_latency``),
   measured after every other step and cached in the work dir.

Every tool runs as a user would run it, in its own process with one thread (``--threads``), ``--jobs`` at a time
where the steps do not depend on each other. One thread per process makes the figures reproducible: the same
seed gives the same table (the latency table is a measurement: cached after the first run, measured again
when the model code changes).
Outputs in the work dir: ``results.md`` / ``results.json`` (the table), ``pareto_step{1,2}.png`` and
``layer_gains_step{1,2}.png`` (the search's own plots, toy latency), ``pareto_dinov3b_1024x2048.png`` (the
searched archs against their DINOv3-B latency at 1024x2048), logs of every step in ``pipeline/logs``.
About 5 minutes on 2 CPU cores (teacher training included: 35 s), up to 11 when other jobs load the machine.
``--ablation`` adds the weight-inheritance comparison of docs/toy_reproduction.md (all-L distilled from the
teacher with every teacher weight vs only the MLPs inherited, same steps, same probe).
"""
import argparse
import hashlib
import heapq
import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, List, Optional

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from jetvit_mm.benchmark.allocator import apply_policy  # noqa: E402
from jetvit_mm.datasets.context_seg import CONTEXT_SEG_SPLITS, TASKS, make_context_seg  # noqa: E402

CONFIGS = REPO / 'configs' / 'demo'
TEACHER_CFG = CONFIGS / 'teacher_context_seg.py'
PROBE_CFG = CONFIGS / 'probe_context_seg.py'
DISTILL_CFG = CONFIGS / 'distill_supernet_context_seg.py'
FIXED_CFG = CONFIGS / 'distill_fixed_context_seg.py'
DEPTH = 12
DATA_VERSION = 4  # bump when the generator's output changes
LATENCY_MODEL = 'dinov3_vitb16'
LATENCY_SIZE = (1024, 2048)


# ------------------------------------------------------------------------------------------------ running tools
class Slots:
    """A counting semaphore that serves the waiting step with the lowest priority number first (then FIFO)."""

    def __init__(self, count: int) -> None:
        self.free = count
        self.cv = threading.Condition()
        self.waiting: list = []
        self.tickets = itertools.count()

    def acquire(self, priority: int) -> None:
        with self.cv:
            ticket = (priority, next(self.tickets))
            heapq.heappush(self.waiting, ticket)
            self.cv.wait(0.1)  # steps that one event released together all queue up: priority decides among them
            while not (self.free > 0 and self.waiting[0] == ticket):
                self.cv.wait()
            heapq.heappop(self.waiting)
            self.free -= 1
            self.cv.notify_all()

    def release(self) -> None:
        with self.cv:
            self.free += 1
            self.cv.notify_all()


class Pipeline:
    """Runs tools in subprocesses, at most ``jobs`` at a time; steps wait for the futures they depend on."""

    def __init__(self, log_dir: Path, jobs: int, threads: int, start: float, quiet: bool = False) -> None:
        self.log_dir = log_dir
        self.slots = Slots(jobs)
        self.pool = ThreadPoolExecutor(max_workers=64)
        self.env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
                        PYTHONUNBUFFERED='1', PYTHONWARNINGS='ignore')
        self.start, self.quiet = start, quiet
        self.failed = threading.Event()
        self.timings: Dict[str, float] = {}
        self.local = threading.local()

    def log(self, message: str) -> None:
        if not self.quiet:
            print(f'[{time.time() - self.start:6.0f} s] {message}', flush=True)

    def tool(self, name: str, script: str, *args, priority: int = 1) -> None:
        """``python tools/<script> args``; its output goes to ``<log_dir>/<name>.log``. Waiting steps start in
        ``priority`` order (0 first: the critical path teacher -> Step 1 -> Step 2)."""
        if self.failed.is_set():
            raise RuntimeError(f'{name}: not started, an earlier step failed')
        log = self.log_dir / f'{name}.log'
        cmd = [sys.executable, str(REPO / 'tools' / script), *map(str, args)]
        held = getattr(self.local, 'held', False)
        if not held:
            self.slots.acquire(priority)
        try:
            began = time.time()
            with open(log, 'w') as f:
                f.write('$ ' + ' '.join(cmd) + '\n')
                f.flush()
                proc = subprocess.run(cmd, cwd=REPO, env=self.env, stdout=f, stderr=subprocess.STDOUT)
            self.timings[name] = time.time() - began
        finally:
            if not held:
                self.slots.release()
        if proc.returncode != 0:
            self.failed.set()
            tail = ''.join(log.read_text().splitlines(keepends=True)[-30:])
            raise RuntimeError(f'{name} failed (exit {proc.returncode}); log {log}:\n{tail}')
        self.log(f'{name}: {self.timings[name]:.0f} s')

    @contextmanager
    def hold(self, priority: int = 0):
        """Keep one slot for every tool this thread runs inside the block (a chain of steps that must not wait
        behind other steps between its links)."""
        self.slots.acquire(priority)
        self.local.held = True
        try:
            yield
        finally:
            self.local.held = False
            self.slots.release()

    def submit(self, fn: Callable, *deps: Future) -> Future:
        def run():
            for dep in deps:
                dep.result()
            return fn()
        return self.pool.submit(run)


# ------------------------------------------------------------------------------------------------ checkpoints
def _runner_state(path: Path) -> Dict[str, torch.Tensor]:
    from jetvit_mm.mm.checkpoint import load_local_checkpoint
    state = load_local_checkpoint(str(path), map_location='cpu')
    return state.get('state_dict', state)


def last_checkpoint(work_dir: Path) -> Path:
    """The checkpoint mmengine's runner wrote last in ``work_dir``."""
    return Path((work_dir / 'last_checkpoint').read_text().strip())


def extract_backbone(checkpoint: Path, prefix: str, out: Path, arch: Optional[str] = None) -> Path:
    """``prefix``-ed weights of a runner checkpoint (``backbone.`` of a segmentor, ``student.`` of a distiller)
    as a standalone JetViT checkpoint (``{'state_dict', 'meta'}``)."""
    state = {k[len(prefix):]: v for k, v in _runner_state(checkpoint).items() if k.startswith(prefix)}
    if not state:
        raise ValueError(f'{checkpoint} has no {prefix}* weights')
    meta = {'jetvit_arch': arch} if arch and set(arch) != {'F'} else {}
    torch.save(dict(state_dict=state, meta=meta), out)
    return out


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.read_bytes() if isinstance(part, Path) else str(part).encode())
    return h.hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ latency
def measure_interleaved(model_name: str, size, repeat: int, warmup: int = 1) -> Dict[str, Dict[str, float]]:
    """Milliseconds of one block of each mixer (F, L, W) and of the shared part (patch embedding + final norm) of
    ``model_name`` at ``size``, batch 1, fp32: ``jetvit_mm.search.latency``'s calls in interleaved rounds (the
    start rotating), so that a change of the machine's load during the measurement hits every mixer alike.
    Returns per key the median and the min and max of the rounds."""
    import statistics

    from jetvit_mm.models import JetViT
    from jetvit_mm.search.latency import measure_latency_samples

    torch.manual_seed(0)
    model = JetViT(model_name, depth=1).eval()  # one block is timed per mixer; the rest is shared
    times = measure_latency_samples(model, size, warmup=warmup, repeat=repeat, min_total_ms=0.)
    return {k: dict(median=statistics.median(v), min=min(v), max=max(v)) for k, v in times.items()}


def latency_table(cache: Path, threads: int, repeat: int) -> Dict[str, float]:
    """Per-mixer block latency (ms) of DINOv3-B at 1024x2048, batch 1, on this machine; cached in ``cache``."""
    # the code that is timed is part of the key: a table measured with older mixers is measured again
    timed_code = _digest(*sorted((REPO / 'jetvit_mm' / 'models').rglob('*.py')))
    # as tools/benchmark.py: freed tensors stay in the heap (no page faults from mapping the big ones again every
    # call); process-wide, harmless here: this is the demo's last step
    kept = apply_policy('keep', 'cpu')
    key = dict(model=LATENCY_MODEL, size=list(LATENCY_SIZE), threads=threads, repeat=repeat,
               timing='interleaved-rotating', torch=torch.__version__, cpus=os.cpu_count(), code=timed_code,
               malloc='keep' if kept else 'system')
    if cache.is_file():
        saved = json.loads(cache.read_text())
        if saved.get('key') == key:
            return saved['table']
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    load = os.getloadavg()
    try:
        rounds = measure_interleaved(LATENCY_MODEL, LATENCY_SIZE, repeat)
    finally:
        torch.set_num_threads(previous)
    table = {k: v['median'] for k, v in rounds.items()}
    cache.write_text(json.dumps(dict(key=key, table=table, rounds=rounds, measured=time.strftime('%Y-%m-%d %H:%M:%S'),
                                     loadavg_before=load, loadavg_after=os.getloadavg()), indent=2))
    return table


# ------------------------------------------------------------------------------------------------ the demo
def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--work-dir', type=Path, default=REPO / 'work_dirs' / 'demo')
    parser.add_argument('--seed', type=int, default=0, help='dataset seed (the runs use the configs\' seed 0)')
    parser.add_argument('--task', choices=TASKS, default='partner',
                        help='the generated task (jetvit_mm.datasets.context_seg): partner (default) or corner')
    parser.add_argument('--jobs', type=int, default=2, help='tools run at the same time')
    parser.add_argument('--threads', type=int, default=1, help='torch threads per tool process')
    parser.add_argument('--train-images', type=int, default=CONTEXT_SEG_SPLITS['train'])
    parser.add_argument('--val-images', type=int, default=CONTEXT_SEG_SPLITS['val'])
    parser.add_argument('--distill-iters', type=int, default=600, help='each supernet distillation')
    parser.add_argument('--finetune-iters', type=int, default=300, help='fine-tune of each arch of the table')
    parser.add_argument('--probe-iters', type=int, default=None, help='linear probe (default: the config\'s)')
    parser.add_argument('--teacher-iters', type=int, default=None, help='teacher training (default: the config\'s)')
    parser.add_argument('--beam-width', type=int, default=2)
    parser.add_argument('--min-gain', type=float, default=0.1, help='Step-1 search plateau (mIoU)')
    parser.add_argument('--latency-threads', type=int, default=os.cpu_count(),
                        help='torch threads for the 1024x2048 latency table')
    parser.add_argument('--latency-repeat', type=int, default=5)
    parser.add_argument('--no-latency', action='store_true', help='skip the 1024x2048 latency table')
    parser.add_argument('--ablation', action='store_true',
                        help='also run the weight-inheritance comparison (all-L, inherit all vs MLP only)')
    parser.add_argument('--quiet', action='store_true')
    return parser.parse_args(argv)


def make_data(root: Path, args: argparse.Namespace) -> Path:
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


def main(argv=None) -> dict:
    args = parse_args(argv)
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
    teacher_key = _digest(TEACHER_CFG, CONFIGS / '_base_' / 'context_seg.py', args.teacher_iters,
                          data / 'context_seg.json')
    stamp = teacher_dir / 'teacher.json'
    cached = stamp.is_file() and json.loads(stamp.read_text()).get('key') == teacher_key and teacher_backbone.is_file()

    def teacher() -> Path:
        if cached:
            p.log(f'teacher: cached ({teacher_backbone})')
            return last_checkpoint(teacher_dir)
        if teacher_dir.exists():
            shutil.rmtree(teacher_dir)
        opts = [f'train_cfg.max_iters={args.teacher_iters}', f'train_cfg.val_interval={args.teacher_iters}'] \
            if args.teacher_iters else []
        p.tool('teacher_train', 'train.py', TEACHER_CFG, '--work-dir', teacher_dir, '--cfg-options', *roots, *opts,
               priority=0)
        ckpt = last_checkpoint(teacher_dir)
        extract_backbone(ckpt, 'backbone.', teacher_backbone)
        stamp.write_text(json.dumps(dict(key=teacher_key, checkpoint=str(ckpt))))
        return ckpt

    t_teacher = p.submit(teacher)

    def probe(tag: str, arch: str, backbone: Path, priority: int = 2) -> float:
        """Linear probe on the frozen backbone: tools/train.py, then tools/test.py; returns the mIoU."""
        out = run_dir / f'probe_{tag}'
        p.tool(f'probe_{tag}', 'train.py', PROBE_CFG, '--work-dir', out, '--cfg-options', *roots, *probe_opts,
               f'model.backbone.arch={arch}', f'model.backbone.checkpoint={backbone}', priority=priority)
        metrics = out / 'metrics.json'
        p.tool(f'test_{tag}', 'test.py', PROBE_CFG, last_checkpoint(out), '--work-dir', out / 'test',
               '--out', metrics, '--cfg-options', *roots, f'model.backbone.arch={arch}', priority=priority)
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
        table = latency_table(work / 'latency_dinov3b_1024x2048.json', args.latency_threads, args.latency_repeat)
        p.log(f'latency table (DINOv3-B, 1024x2048): {time.time() - began:.0f} s')
    summary = json.loads((search_dir / 'search.json').read_text())
    report = write_report(work, search_dir, summary, archs, miou, table)
    total = time.time() - start
    load_end = os.getloadavg()
    report.update(seconds=dict(total=round(total, 1), pipeline=round(pipeline_s, 1),
                               steps={k: round(v, 1) for k, v in p.timings.items()}),
                  machine=dict(cpus=os.cpu_count(), loadavg_start=load_start, loadavg_end=load_end),
                  teacher_cached=cached, args={k: str(v) for k, v in vars(args).items()})
    (work / 'results.json').write_text(json.dumps(report, indent=2))
    line = (f'demo: {total:.0f} s in all ({os.cpu_count()} CPUs, load average {load_start[0]:.2f} at the start, '
            f'{load_end[0]:.2f} at the end; teacher {"cached" if cached else "trained"})')
    with open(work / 'results.md', 'a') as f:
        f.write('\n' + line + '\n')
    print(report['markdown'])
    print(f'\n{line}; outputs in {work}')
    return report


ROWS = (('teacher', 'teacher (all F)'), ('all_L', 'all L'), ('all_W', 'all W'), ('step1', 'Step 1: L+W search'),
        ('1F', 'Step 2: + 1 F'), ('2F', 'Step 2: + 2 F'), ('inherit_all', 'all L, every weight inherited'),
        ('inherit_mlp', 'all L, MLPs only inherited'))


def write_report(work: Path, search_dir: Path, summary: dict, archs: Dict[str, str], miou: Dict[str, float],
                 table: Optional[Dict[str, float]]) -> dict:
    """results.md, the plots in the work dir; returns the report (with its markdown)."""
    from jetvit_mm.search.latency import predict_latency

    search_scores: Dict[str, float] = {}
    for record in summary['archs']:
        search_scores.setdefault(record['arch'], record['score'])  # Step-1 score of the Step-1 archs
    search_scores['F' * DEPTH] = summary['teacher_score']
    teacher_ms = predict_latency('F' * DEPTH, table) if table else None
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
        plot_search(summary, table, rows, work / 'pareto_dinov3b_1024x2048.png')
    return dict(rows=rows, markdown=markdown, notes=notes, latency_table_ms=table,
                step1_arch=archs.get('step1'), step2_archs=[archs.get(t) for t in ('step1', '1F', '2F')])


def plot_search(summary: dict, table: Dict[str, float], rows: List[dict], path: Path) -> None:
    """Every scored arch: search mIoU vs DINOv3-B latency at 1024x2048, by step, the Pareto front of each step
    and the archs of the table."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    from jetvit_mm.search.latency import predict_latency
    from jetvit_mm.search.report import pareto_front

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
    teacher_s = predict_latency('F' * DEPTH, table) / 1e3
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


if __name__ == '__main__':
    main()
