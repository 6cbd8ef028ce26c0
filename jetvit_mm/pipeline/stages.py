"""The JetViT method as one list of workflow stages (:data:`STEPS`) for a segmentation, depth or detection config,
run by ``tools/pipeline.py`` and by the demo; each stage one of our tools in its own folder under the work dir."""
import json
import statistics
import sys
import warnings
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .engine import Workflow
from .inputs import CONFIG_LOCK
from .stage import Arg, FileText, Join, Stage, python_tool

REPO = Path(__file__).resolve().parents[2]
TASKS = ('seg', 'depth', 'det')
DET_PROBE = REPO / 'configs' / 'det' / 'mask_rcnn_jetvit_dinov3_base_coco.py'


@dataclass(frozen=True)
class TaskProfile:
    """What the task decides: the downstream config the teacher is probed with and the search scores with, its
    metric, the Step-2 config (None: CONFIG with ``model.student.search_space=None``), for depth the teacher's own
    head (converted official file), the pseudo-label fine-tune config and the evaluation config, and a teacher
    trained first from ``teacher_config`` (the demo's: the search scores with its own head)."""
    task: str
    probe_config: Path
    metric: str
    step2_config: Optional[Path] = None
    finetune_config: Optional[Path] = None  # depth: pseudo-label fine-tune; else the export's finetune_<ARCH>.py
    eval_config: Optional[Path] = None  # depth: tools/test.py config of the teacher and the hybrid
    teacher_config: Optional[Path] = None


def guess_task(config: Path) -> str:
    """``depth`` for configs/depth, else ``seg`` (a detection run says ``--task det``: it shares the distillation
    configs of segmentation)."""
    return 'depth' if Path(config).resolve().parent.name == 'depth' else 'seg'


def _sibling(config: Path, name: str, what: str, flag: str) -> Path:
    path = Path(config).resolve().parent / name
    if not path.is_file():
        raise FileNotFoundError(f'{config}: no {what} found at {path}; pass {flag}')
    return path


def _probe_of(config: Path) -> Path:
    """The linear-probe config of a segmentation distillation config, by the repository's naming."""
    config = Path(config).resolve()
    if config.parent.name == 'demo':
        return _sibling(config, config.name.replace('distill_supernet_', 'probe_'), 'probe config', '--probe-config')
    parts = config.stem.split('_')  # dinov3_base_cityscapes -> dinov3_base_linear_cityscapes
    probe = REPO / 'configs' / 'probe' / ('_'.join(parts[:-1] + ['linear', parts[-1]]) + '.py')
    if not probe.is_file():
        raise FileNotFoundError(f'{config}: no probe config found at {probe}; pass --probe-config')
    return probe


def task_profile(config: Path, task: Optional[str] = None, probe_config: Optional[Path] = None,
                 step2_config: Optional[Path] = None, metric: Optional[str] = None) -> TaskProfile:
    """The profile of ``config`` (a Step-1 distillation config); the arguments override what is derived."""
    task = task or guess_task(config)
    if task not in TASKS:
        raise ValueError(f'unknown task {task!r}; valid: {", ".join(TASKS)}')
    config = Path(config).resolve()
    step2 = step2_config or (config.with_name(config.stem + '_step2.py')
                             if config.with_name(config.stem + '_step2.py').is_file() else None)
    if task == 'depth':
        size = config.stem.split('_')[1]  # depthanything_large_distill
        return TaskProfile('depth', Path(probe_config or _sibling(config, f'depthanything_{size}_search_da2k.py',
                                                                 'DA-2K search config', '--probe-config')),
                           metric or 'da2k_acc', step2,
                           _sibling(config, f'depthanything_{size}_pseudolabel_finetune.py', 'fine-tune config',
                                    '--probe-config'),
                           _sibling(config, f'depthanything_{size}_eval.py', 'evaluation config', '--probe-config'))
    if task == 'det':
        return TaskProfile('det', Path(probe_config or DET_PROBE), metric or 'coco/bbox_mAP', step2)
    return TaskProfile('seg', Path(probe_config or _probe_of(config)), metric or 'mIoU', step2)


@dataclass(frozen=True)
class MethodOptions:
    """What ``tools/pipeline.py`` takes; the demo's task configuration sets the rest: train iterations per kind of
    train stage (``teacher``, ``probe``, ``distill``, ``finetune``; over ``max_iters``), more ``tools/search.py``
    flags per step, and a latency table Step 1's search starts from when it is there."""
    config: Path
    teacher: Path
    work_dir: Path
    profile: TaskProfile
    data_root: Optional[Path] = None
    launcher: str = 'none'
    gpus: int = 8
    max_iters: Optional[int] = None
    beam_width: int = 4
    max_full: int = 2
    device: Optional[str] = None
    iterations: Mapping[str, int] = field(default_factory=dict)
    search_flags: Mapping[int, Tuple] = field(default_factory=dict)
    search_latency: Optional[Path] = None


@cache
def _config(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        from jetvit_mm.mm.engine.launch import read_config

        with CONFIG_LOCK:  # mmengine's config reader is not thread-safe
            return read_config(str(path))


def loader_roots(config: Path, data_root: Optional[Path], splits: Sequence[str] = ('train', 'val', 'test')
                 ) -> List[str]:
    """``<split>_dataloader.dataset.data_root=D`` for each dataloader ``config`` defines."""
    if data_root is None:
        return []
    cfg = _config(Path(config))
    return [f'{s}_dataloader.dataset.data_root={data_root}' for s in splits if cfg.get(f'{s}_dataloader')]


def config_iterations(config: Path) -> Optional[int]:
    """The config's ``train_cfg.max_iters`` (None when it has none)."""
    train_cfg = _config(Path(config)).get('train_cfg') or {}
    return train_cfg.get('max_iters')


class StageBuilder:
    """Builds the stages of one run, the method's and a task configuration's own, one method per stage kind."""

    def __init__(self, opts: MethodOptions) -> None:
        self.o, self.w = opts, Path(opts.work_dir).resolve()

    def last(self, stage: str) -> FileText:
        return FileText(self.w / stage / 'last_checkpoint')

    def data(self, options: Sequence[Arg]) -> Tuple[Path, ...]:
        """``--data-root`` when ``options`` point a dataloader at it: the stage reads it, its files are inputs."""
        reads = any(isinstance(o, str) and '_dataloader.dataset.data_root=' in o for o in options)
        return (self.o.data_root, ) if reads and self.o.data_root is not None else ()

    def train(self, name: str, config: Arg, options: Sequence[Arg], deps: Sequence[str], iters_of: Path,
              kind: str, has_val: bool = False) -> Stage:
        """``tools/train.py config`` (``kind``: which of ``MethodOptions.iterations`` it runs)."""
        o = self.o
        tool = [str(REPO / 'tools' / 'train.py'), config]
        cmd = (['torchrun', f'--nproc_per_node={o.gpus}', *tool, '--launcher', 'pytorch'] if o.launcher == 'pytorch'
               else [sys.executable, *tool])
        iters = o.iterations.get(kind, o.max_iters)
        smoke = [] if iters is None else [f'train_cfg.max_iters={iters}'] + (
            [f'train_cfg.val_interval={iters}'] if has_val else [])
        return Stage(name, self.w / name, [*cmd, '--work-dir', self.w / name, '--cfg-options', *options, *smoke],
                     deps=deps, resume_flag='--resume', resume_file='last_checkpoint',
                     iterations=iters or config_iterations(iters_of), timing_key=str(iters_of),
                     products=('last_checkpoint', ), pointers=('last_checkpoint', ), data=self.data(options))

    def test(self, name: str, config: Path, checkpoint: Arg, options: Sequence[Arg], deps: Sequence[str]) -> Stage:
        out = self.w / name
        roots = loader_roots(config, self.o.data_root, ('test', ))
        opts = ['--cfg-options', *roots, *options] if roots or options else []
        return Stage(name, out, python_tool(REPO, 'test.py', config, checkpoint, '--work-dir', out, '--out',
                                            out / 'metrics.json', *opts), deps=deps, products=('metrics.json', ),
                     data=self.data(roots))

    def teacher(self, name: str, config: Path) -> List[Stage]:
        """A teacher trained end to end by ``config`` (stage ``name``) and its backbone cut out into
        ``<name>_backbone/teacher_backbone.pth`` (stage ``<name>_backbone``)."""
        from jetvit_mm.models.checkpoint.extract import extract_backbone

        trained, out = self.last(name), self.w / f'{name}_backbone' / 'teacher_backbone.pth'
        return [self.train(name, config, loader_roots(config, self.o.data_root), [], config, 'teacher', True),
                Stage(f'{name}_backbone', out.parent, ['extract_backbone', trained, 'backbone.'], deps=[name],
                      action=lambda s: extract_backbone(Path(trained.value()), 'backbone.', out),
                      products=(out.name, ))]

    def head(self) -> Tuple[Arg, List[str]]:
        """The checkpoint whose head the search scores with, and the stage that writes it."""
        p = self.o.profile
        if p.task == 'depth':
            return self.w / 'convert_teacher' / 'teacher_mmseg.pth', ['convert_teacher']
        name = 'teacher' if p.teacher_config else 'probe_teacher'
        return self.last(name), [name]

    def search(self, step: int, deps: Sequence[str]) -> Stage:
        o, p = self.o, self.o.profile
        out = self.w / f'step{step}_search'
        head, head_deps = self.head()
        cmd = python_tool(REPO, 'search.py', p.probe_config, self.last(f'step{step}_distill'), '--stage', step,
                          '--metric', p.metric, '--head-checkpoint', head, '--work-dir', out, '--beam-width',
                          o.beam_width, *(['--device', o.device] if o.device else []), *o.search_flags.get(step, ()))
        copy_in: Tuple = ((o.search_latency, 'latency_table.json'), ) if o.search_latency and step == 1 else ()
        products = ('search_state.json', 'search.json', f'best_arch_step{step}.txt', 'latency_table.json')
        if step == 2:
            best1 = FileText(self.w / 'step1_search' / 'best_arch_step1.txt')
            cmd += ['--step1-arch', best1, '--max-full', o.max_full, '--export', '--distill-config', o.config]
            copy_in = tuple((self.w / 'step1_search' / n, n) for n in ('search_state.json', 'latency_table.json'))
            products += ('hybrid_*.pth', 'finetune_*.py')
        roots = loader_roots(p.probe_config, o.data_root, ('val', ))
        cmd += ['--cfg-options', *roots] if roots else []
        return Stage(f'step{step}_search', out, cmd, deps=[*deps, *head_deps], resume_flag='--resume',
                     resume_file='search_state.json', copy_in=copy_in, products=products, data=self.data(roots))


def teacher_stages(b: StageBuilder) -> List[Stage]:
    """The teacher's reference figure (and the teacher itself when the task trains it)."""
    o, p = b.o, b.o.profile
    if p.task == 'depth':
        conv = b.head()[0]
        return [Stage('convert_teacher', b.w / 'convert_teacher',
                      python_tool(REPO, 'convert_depth_anything.py', o.teacher, conv), products=(conv.name, )),
                b.test('test_teacher', p.eval_config, conv, [], ['convert_teacher'])]
    trained = b.teacher('teacher', p.teacher_config) if p.teacher_config else []
    probe = b.train('probe_teacher', p.probe_config, [*loader_roots(p.probe_config, o.data_root),
                                                      f'model.backbone.checkpoint={o.teacher}'],
                    [s.name for s in trained[-1:]], p.probe_config, 'probe', has_val=True)
    return [*trained, probe, b.test('test_teacher', p.probe_config, b.last('probe_teacher'), [], ['probe_teacher'])]


def distill_and_search(step: int) -> Callable[[StageBuilder], List[Stage]]:
    """Step ``step``'s supernet distillation and search (Step 2: from Step 1's arch, with export)."""
    def stages(b: StageBuilder) -> List[Stage]:
        o, p = b.o, b.o.profile
        teacher_opt = f'model.teacher.checkpoint={o.teacher}'
        if step == 1:
            deps = ['teacher_backbone'] if p.teacher_config else []
            distill = b.train('step1_distill', o.config, [*loader_roots(o.config, o.data_root, ('train', )),
                                                          teacher_opt], deps, o.config, 'distill')
            return [distill, b.search(1, ['step1_distill'])]
        cfg = p.step2_config or o.config
        best1 = FileText(b.w / 'step1_search' / 'best_arch_step1.txt')
        options = [*loader_roots(cfg, o.data_root, ('train', )), teacher_opt,
                   *([] if p.step2_config else ['model.student.search_space=None']),
                   Join('model.student.step1_arch=', best1)]
        return [b.train('step2_distill', cfg, options, ['step1_search'], cfg, 'distill'),
                b.search(2, ['step2_distill', 'step1_search'])]
    return stages


def hybrid_stages(b: StageBuilder) -> List[Stage]:
    """Fine-tune of the searched hybrid and its final evaluation."""
    o, p = b.o, b.o.profile
    arch = FileText(b.w / 'step2_search' / 'best_arch_step2.txt')
    teacher_opt = f'model.teacher.checkpoint={o.teacher}'
    arch_opt = Join('model.backbone.arch=', arch)
    if p.task == 'depth':
        weights = Join(b.w / 'step2_search' / 'hybrid_', arch, '.pth')
        ft = b.train('finetune', p.finetune_config, [*loader_roots(p.finetune_config, o.data_root, ('train', )),
                                                     teacher_opt, arch_opt, Join('model.backbone.checkpoint=', weights),
                                                     f'model.decode_head.checkpoint={b.head()[0]}'],
                     ['step2_search', 'convert_teacher'], p.finetune_config, 'finetune')
        return [ft, b.test('test_hybrid', p.eval_config, b.last('finetune'), [arch_opt], ['finetune'])]
    ft_cfg = Join(b.w / 'step2_search' / 'finetune_', arch, '.py')
    ft = b.train('finetune', ft_cfg, [*loader_roots(o.config, o.data_root, ('train', )), teacher_opt],
                 ['step2_search'], o.config, 'finetune')
    probe = b.train('probe_hybrid', p.probe_config, [*loader_roots(p.probe_config, o.data_root), arch_opt,
                                                     Join('model.backbone.checkpoint=', b.last('finetune'))],
                    ['finetune'], p.probe_config, 'probe', has_val=True)
    return [ft, probe, b.test('test_hybrid', p.probe_config, b.last('probe_hybrid'), [arch_opt], ['probe_hybrid'])]


def report_stage(b: StageBuilder) -> List[Stage]:
    """``report/report.md``: the teacher against the searched hybrid (:func:`write_method_report`)."""
    w, metric = b.w, b.o.profile.metric
    return [Stage('report', w / 'report', ['report', metric], deps=['test_teacher', 'test_hybrid', 'step2_search'],
                  inputs=[w / 'test_teacher' / 'metrics.json', w / 'test_hybrid' / 'metrics.json',
                          w / 'step2_search' / 'search.json'],
                  action=lambda stage: write_method_report(w, metric), products=('report.md', 'report.json'),
                  note=f'python -c "from jetvit_mm.pipeline.stages import write_method_report; '
                       f'from pathlib import Path; write_method_report(Path(\'{w}\'), \'{metric}\')"')]


# The method, in order: each builds its stages from the run's options (every task, the demo's included)
STEPS: List[Callable[[StageBuilder], List[Stage]]] = [
    teacher_stages, distill_and_search(1), distill_and_search(2), hybrid_stages, report_stage]


def method_stages(opts: MethodOptions) -> List[Stage]:
    """Every stage of the method, in order (the last one writes the report)."""
    b = StageBuilder(opts)
    return [stage for step in STEPS for stage in step(b)]


def logged_step_time(work_dir: Path) -> Optional[float]:
    """The median seconds per iteration mmengine logged in a run's folder (``*/vis_data/scalars.json``)."""
    times = []
    for scalars in sorted(Path(work_dir).glob('*/vis_data/scalars.json')):
        for line in scalars.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if 'time' in record and 'step' in record:
                times.append(float(record['time']))
    return statistics.median(times) if times else None


def stage_estimate(stage: Stage, step_times: Dict[str, Tuple[float, str]]) -> str:
    """``--plan``'s time estimate of a stage, saying where the step time comes from."""
    marker = Path(stage.out_dir) / '.stage.json'
    took = json.loads(marker.read_text()).get('seconds') if marker.is_file() else None
    if stage.iterations and stage.name in step_times:
        seconds, source = step_times[stage.name]
        total = stage.iterations * seconds
        return (f'{stage.iterations} iterations x {seconds:.3g} s/iteration ({source}) = '
                + (f'{total / 3600:.2f} h' if total >= 3600 else f'{total:.0f} s'))
    if took is not None:
        return f'{took:.0f} s (its last run)'
    if stage.iterations:
        return f'{stage.iterations} iterations x unknown step time (none logged yet: pass --measure-steps N)'
    if stage.action is not None:
        return 'seconds (a Python step)'
    return 'not estimated (evaluation: one pass over the val set per scored arch)'


def plan_text(wf: Workflow, stages: Sequence[Stage], step_times: Dict[str, Tuple[float, str]]) -> str:
    """Every command the run would start, copy-pastable, each with its estimate and whether it would be skipped."""
    lines = []
    for i, (stage, state) in enumerate(zip(stages, wf.preview(stages)), 1):
        action = dict(done='skipped (done, same inputs)', resume='resumed (killed midway, same inputs)').get(
            state, 'runs' + (' (its inputs are made by the stages before it)' if 'not made' in state else ''))
        lines += [f'# [{i}] {stage.name}: {action}; estimate: {stage_estimate(stage, step_times)}', stage.shell(), '']
    return '\n'.join(lines)


def write_method_report(work: Path, metric: str) -> dict:
    """``report/report.md`` and ``report.json``: teacher vs the searched hybrids (final metrics, search scores,
    predicted latency from the search's own latency table), with the search's Pareto and per-layer pictures and the
    teacher vs hybrids picture."""
    from jetvit_mm.search.latency import predict_latency
    from jetvit_mm.search.report import plot_pareto

    out = work / 'report'
    out.mkdir(parents=True, exist_ok=True)
    teacher_m = json.loads((work / 'test_teacher' / 'metrics.json').read_text())
    hybrid_m = json.loads((work / 'test_hybrid' / 'metrics.json').read_text())
    summary = json.loads((work / 'step2_search' / 'search.json').read_text())
    table = json.loads((work / 'step2_search' / 'latency_table.json').read_text())['table']
    best1 = (work / 'step1_search' / 'best_arch_step1.txt').read_text().strip()
    best2 = (work / 'step2_search' / 'best_arch_step2.txt').read_text().strip()
    teacher_arch = 'F' * len(best2)
    ms = {a: predict_latency(a, table) for a in (teacher_arch, best1, best2)}
    rows = [dict(model='teacher (all F)', arch=teacher_arch, metrics=teacher_m, latency_ms=ms[teacher_arch]),
            dict(model='Step-2 hybrid, fine-tuned', arch=best2, metrics=hybrid_m, latency_ms=ms[best2])]
    for r in rows:
        r['speedup'] = round(ms[teacher_arch] / r['latency_ms'], 3)
    lines = [f'# JetViT pipeline report ({work})', '', f'| model | arch | {metric} | predicted latency (ms) | '
             'speed-up |', '|---|---|---:|---:|---:|']
    for r in rows:
        value = r['metrics'].get(metric, '-')
        value = f'{value:.2f}' if isinstance(value, float) else value
        lines.append(f'| {r["model"]} | `{r["arch"]}` | {value} | {r["latency_ms"]:.2f} | {r["speedup"]:.2f}x |')
    lines += ['', f'Step-1 best arch `{best1}`; Step-2 best arch `{best2}`. Latency: predicted from the search\'s '
              'per-mixer table (step2_search/latency_table.json, measured by tools/search.py on its device at the '
              'val input size). Every metric: report.json.', '']
    points = {r['arch']: (r['score'], r['predicted_latency_ms']) for r in summary['archs']
              if r.get('predicted_latency_ms') is not None}
    pictures = []
    if points:
        plot_pareto(points, out / 'pareto_teacher_vs_hybrids.png', f'{metric} (search)',
                    teacher=(summary['teacher_score'], ms[teacher_arch]))
        pictures.append('pareto_teacher_vs_hybrids.png')
    for step in (1, 2):
        for name in (f'pareto_step{step}.png', f'layer_gains_step{step}.png'):
            src = work / f'step{step}_search' / name
            if src.is_file():
                (out / name).write_bytes(src.read_bytes())
                pictures.append(name)
    lines += [f'![{p}]({p})' for p in pictures]
    report = dict(metric=metric, step1_arch=best1, step2_arch=best2, rows=rows, teacher_search_score=summary[
        'teacher_score'], search_archs=summary['archs'], pictures=pictures)
    (out / 'report.md').write_text('\n'.join(lines) + '\n')
    (out / 'report.json').write_text(json.dumps(report, indent=2, default=str))
    return report
