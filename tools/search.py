"""Two-stage beam search of a trained JetViT supernet, scored by the framework's own evaluator.

    # Step 1 ({L, W} supernet): from all-L, L -> W until the gain plateaus
    python tools/search.py CONFIG STEP1_SUPERNET.pth --stage 1 --head-checkpoint TEACHER_PROBE.pth --work-dir D
    # Step 2 ({winner, F} supernet): from Step 1's best, -> F until teacher score - tolerance or --max-full
    python tools/search.py CONFIG STEP2_SUPERNET.pth --stage 2 --head-checkpoint TEACHER_PROBE.pth --work-dir D \
        --max-full 2 --tolerance 0.5 --export

CONFIG is the downstream evaluation config (e.g. configs/probe/dinov3_base_linear_cityscapes.py): its
val_dataloader and val_evaluator score every arch, its backbone arguments must match the supernet's. The state
(every scored arch) is rewritten atomically to D/search_state.json after each score; --resume continues a
killed search without re-scoring anything.
"""
import argparse
import math
import time
from pathlib import Path

import torch
from mmengine.config import Config, DictAction
from mmengine.utils import import_modules_from_strings

from jetvit_mm.cli import check_inputs
from jetvit_mm.mm.checkpoint import enable_runner_checkpoint_loading
from jetvit_mm.mm.export import export_hybrid
from jetvit_mm.mm.search_runner import (
    ArchScorer,
    check_metric,
    default_thresholds,
    load_supernet,
    saved_distill_objective,
    signed,
)
from jetvit_mm.search import search_step1, search_step2
from jetvit_mm.search.latency import load_or_measure, predict_latency, read_latency_table
from jetvit_mm.search.report import layer_gains, pareto_front, plot_gains, plot_pareto
from jetvit_mm.search.state import read_json, write_json_atomic


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='downstream evaluation config (val_dataloader + val_evaluator)')
    parser.add_argument('checkpoint', help='supernet distillation checkpoint (tools/train.py output)')
    parser.add_argument('--stage', type=int, choices=(1, 2), default=1)
    parser.add_argument('--head-checkpoint', help='the teacher\'s trained downstream head (e.g. its probe run)')
    parser.add_argument('--metric', default='mIoU', help='evaluator metric to optimise, or distill_loss (no labels)')
    parser.add_argument('--beam-width', type=int, default=4)
    parser.add_argument('--min-gain', type=float, default=None,
                        help='Step 1: stop when a stage gains less, in the metric\'s units (default: 0.1 for a '
                             'percent metric such as mIoU, 0.001 for a fraction such as COCO mAP or AbsRel)')
    parser.add_argument('--max-full', type=int, default=None, help='Step 2: at most this many F layers')
    parser.add_argument('--tolerance', type=float, default=None,
                        help='Step 2: stop at teacher score - tolerance, in the metric\'s units (default: 0.5 for '
                             'a percent metric, 0.005 for a fraction); negative: never stop on the score')
    parser.add_argument('--step1-arch', help='Step 2 start (default: Step 1\'s best from the work dir state)')
    parser.add_argument('--latency-budget', type=float, default=None, help='max predicted latency, ms')
    parser.add_argument('--latency-size', type=int, nargs=2, default=None, metavar=('H', 'W'),
                        help='input size of the latency model (default: the first val batch after the data '
                             'preprocessor, rounded up to whole patches)')
    parser.add_argument('--latency-table', type=Path, default=None,
                        help='cost archs with this latency table instead of measuring one here: a search\'s '
                             'latency_table.json or {"base", "F", "L", "W"} in ms, e.g. measured on the deployment '
                             'device at the deployment size')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--resume', action='store_true', help='continue the search saved in the work dir')
    parser.add_argument('--work-dir', default=None)
    parser.add_argument('--export', action='store_true', help='export the best arch of this stage')
    parser.add_argument('--distill-config', help='with --export: the distillation config the fine-tune config inherits')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    args = parser.parse_args(argv)
    check_inputs(parser, args, ('config', 'checkpoint', 'head_checkpoint', 'distill_config', 'latency_table'))
    return args


def progress(stage: int, done: int, arch: str, value: float, best: float, cached: bool) -> None:
    tag = 'cached' if cached else 'scored'
    print(f'[search step {stage}] {done:4d} archs | {tag} {arch} = {value:.4f} | best so far {best:.4f}', flush=True)


def main(argv=None) -> dict:
    args = parse_args(argv)
    enable_runner_checkpoint_loading()
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    import_modules_from_strings(**cfg.get('custom_imports', dict(imports=[])))
    work_dir = Path(args.work_dir or Path('work_dirs') / f'search_{Path(args.config).stem}')
    state_path = work_dir / 'search_state.json'

    # every check before any scoring
    higher = check_metric(args.metric, cfg.get('val_evaluator'))
    min_gain, tolerance = default_thresholds(args.metric)
    args.min_gain = min_gain if args.min_gain is None else args.min_gain
    args.tolerance = tolerance if args.tolerance is None else args.tolerance
    state = read_json(state_path) if state_path.is_file() else None
    if state is not None and not args.resume and str(args.stage) in state.get('stages', {}):
        raise FileExistsError(f'{state_path} already holds a step {args.stage} search: pass --resume to continue it '
                              f'or choose another --work-dir')
    state = state or dict(version=1, stages={})
    stage_key = str(args.stage)
    saved = state['stages'].get(stage_key)
    identity = dict(checkpoint=str(args.checkpoint), metric=args.metric, head_checkpoint=args.head_checkpoint)
    if saved is not None and any(saved.get(k, v) != v for k, v in identity.items()):
        was = ' / '.join(str(saved.get(k, v)) for k, v in identity.items())
        raise ValueError(f'{state_path} was written for {was} (checkpoint / metric / head checkpoint); use another '
                         f'--work-dir for {" / ".join(str(v) for v in identity.values())}')
    supernet, teacher = load_supernet(args.checkpoint, cfg)
    depth = supernet.depth
    if args.stage == 1:
        if set(''.join(supernet.search_space)) != {'L', 'W'} or any(s != 'LW' for s in supernet.search_space):
            raise ValueError(f'step 1 needs an {{L, W}} supernet; this one has {supernet.search_space}')
        start = 'L' * depth
    else:
        start = args.step1_arch or state['stages'].get('1', {}).get('best_arch')
        if start is None:
            raise ValueError('step 2 needs --step1-arch or a finished step 1 in the work dir')
        expected = tuple(letter if letter == 'F' else letter + 'F' for letter in start)
        if supernet.search_space != expected:
            raise ValueError(f'step 2 supernet space {supernet.search_space} does not match step 1 arch {start!r} '
                             f'(expected {expected})')
    scorer = ArchScorer(cfg, supernet, teacher, args.metric, args.head_checkpoint, device=args.device,
                        distill_objective=saved_distill_objective(args.checkpoint))
    if args.latency_table is not None:
        table, size = read_latency_table(args.latency_table)
        size = tuple(args.latency_size or size or ())
    else:
        size = tuple(args.latency_size or scorer.input_size())
        table = load_or_measure(work_dir / 'latency_table.json', supernet, size, args.device)
    cost = lambda arch: predict_latency(arch, table)  # noqa: E731
    if args.latency_budget is not None and cost(start) > args.latency_budget:
        raise ValueError(f'latency budget {args.latency_budget} ms is impossible: the cheapest start arch {start!r} '
                         f'is predicted at {cost(start):.1f} ms (table: {table})')

    # the resumable state
    stage_state = saved or dict(identity, higher_is_better=higher, scores={}, history=[], latency_ms=table,
                                latency_size=list(size))
    if args.stage == 1:  # the thresholds in force (metric units), for the record
        stage_state['min_gain'] = args.min_gain
    else:
        stage_state['tolerance'] = args.tolerance
    state['stages'][stage_key] = stage_state
    if 'teacher_score' not in stage_state:  # per stage: each stage may score with its own metric and head
        stage_state['teacher_score'] = scorer.teacher_score()
    write_json_atomic(state_path, state)
    teacher_value = stage_state['teacher_score']
    memo = {arch: (v if higher else -v) for arch, v in stage_state['scores'].items()}

    def score(arch: str) -> float:
        value = scorer.score_arch(arch)
        stage_state['scores'][arch] = value
        stage_state['history'].append([arch, value, time.time()])
        write_json_atomic(state_path, state)
        best = max(stage_state['scores'].values()) if higher else min(stage_state['scores'].values())
        progress(args.stage, len(stage_state['scores']), arch, value, best, cached=False)
        return value

    objective = signed(score, higher)
    common = dict(beam_width=args.beam_width, cost=cost, budget=args.latency_budget, seed=args.seed, scores=memo)
    if args.stage == 1:
        result = search_step1(objective, depth, min_gain=args.min_gain, **common)
    else:
        teacher_signed = teacher_value if higher else -teacher_value
        result = search_step2(objective, start, teacher_score=teacher_signed,
                              tolerance=args.tolerance, max_full=args.max_full, **common)
    value = lambda arch: stage_state['scores'][arch]  # noqa: E731
    stage_state.update(best_arch=result.best_arch, best_score=value(result.best_arch),
                       stop_reason=result.stop_reason, stages=[[s.best_arch for s in result.stages]])
    write_json_atomic(state_path, state)

    # outputs
    points = {arch: (v if higher else -v, cost(arch)) for arch, v in stage_state['scores'].items()}
    front = pareto_front(points)
    gains = layer_gains(result.stages, {a: v for a, (v, _) in points.items()}, depth)
    # Fig. 7's numbers: per search stage, the gain (positive = better) of each one-layer move; None: not scored
    stage_state['layer_gains'] = [[None if math.isnan(g) else g for g in row] for row in gains]
    write_json_atomic(state_path, state)
    records = [dict(arch=a, score=v, predicted_latency_ms=cost(a), L=a.count('L'), W=a.count('W'), F=a.count('F'),
                    stage=int(k), pareto=(k == stage_key and a in front))
               for k, st in state['stages'].items() for a, v in st['scores'].items()]
    summary = dict(metric=args.metric, higher_is_better=higher, teacher_score=teacher_value,
                   teacher_latency_ms=cost('F' * depth), latency_size=list(size),
                   best={k: dict(arch=st.get('best_arch'), score=st.get('best_score'),
                                 stop_reason=st.get('stop_reason')) for k, st in state['stages'].items()},
                   layer_gains={k: st.get('layer_gains') for k, st in state['stages'].items()},
                   archs=records)
    write_json_atomic(work_dir / 'search.json', summary)
    (work_dir / f'best_arch_step{stage_key}.txt').write_text(result.best_arch + '\n')
    plot_pareto(points, work_dir / f'pareto_step{stage_key}.png', args.metric + ('' if higher else ' (negated)'),
                teacher=(teacher_value if higher else -teacher_value, cost('F' * depth)))
    title = 'gain of turning each layer into F' if args.stage == 2 else 'gain of turning each L layer into W'
    plot_gains(gains, work_dir / f'layer_gains_step{stage_key}.png', title)
    print(f'step {stage_key}: best {result.best_arch} {args.metric}={value(result.best_arch):.4f} '
          f'(teacher {teacher_value:.4f}), predicted {cost(result.best_arch):.1f} ms vs teacher '
          f'{cost("F" * depth):.1f} ms; stop: {result.stop_reason}')
    if args.export:
        paths = export_hybrid(supernet, result.best_arch, work_dir, args.head_checkpoint, args.distill_config)
        summary['export'] = {k: str(v) for k, v in paths.items()}
        write_json_atomic(work_dir / 'search.json', summary)
        for kind, path in paths.items():
            print(f'exported {kind}: {path}')
    return summary


if __name__ == '__main__':
    main()
