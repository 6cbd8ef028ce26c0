"""Two-stage beam search of a trained JetViT supernet, scored by the framework's own evaluator.

    # Step 1 ({L, W} supernet): from all-L, L -> W until the gain plateaus
    python tools/search.py CONFIG STEP1_SUPERNET.pth --stage 1 --head-checkpoint TEACHER_PROBE.pth --work-dir D
    # Step 2 ({winner, F} supernet): from Step 1's best, -> F until teacher score - tolerance or --max-full
    python tools/search.py CONFIG STEP2_SUPERNET.pth --stage 2 --head-checkpoint TEACHER_PROBE.pth --work-dir D \\
        --max-full 2 --tolerance 0.5 --export

    # the same on N processes (each arch scored over a data-parallel split of the val set; the same scores)
    torchrun --nproc_per_node N tools/search.py CONFIG STEP1_SUPERNET.pth --stage 1 ... --launcher pytorch

The search runs as mmengine's validation loop (jetvit_mm.mm.search.loop.JetViTSearchLoop, set as the config's
val_cfg with these flags as its options) of the runner the config builds.
CONFIG is the downstream evaluation config (e.g. configs/probe/dinov3_base_linear_cityscapes.py): its
val_dataloader and val_evaluator score every arch, its backbone arguments must match the supernet's. The state
(every scored arch) is rewritten atomically to D/search_state.json after each score; --resume continues a
killed search without re-scoring anything, and is refused, naming it, when an input that changes a score differs
(the checkpoints' tensors, the metric and its direction, the backbone, head, test_cfg and data preprocessor of the
model config, the val data and evaluator).

One search writes a work dir at a time: D/search.lock holds the writer's pid while it runs, and a second search
there is refused, naming it. Under torchrun every rank dies with torchrun (a parent-death signal, Linux), and before
any scoring every rank's inputs (the above, the val files by content and these flags) are gathered and compared: a
difference is refused on every rank, naming the rank and the input.
"""
import argparse
import contextlib
import os
from pathlib import Path

import torch
from mmengine.config import Config

from jetvit_mm.cli import arch_string, check_arch_letters, finite, integer, positive, run_main
from jetvit_mm.cli import count as count_arg
from jetvit_mm.mm.engine.launch import (
    LAUNCHERS,
    ConfigOptions,
    build_runner,
    check_common_args,
    process_group_teardown,
    read_config,
)
from jetvit_mm.mm.search.scoring import declared_depth, declared_letters
from jetvit_mm.processes import die_with_parent, work_dir_lock
from jetvit_mm.search.latency import read_latency_table

PARENT = os.getppid()  # the launcher, read as early as the imports allow


def build_parser() -> argparse.ArgumentParser:
    """The search's command line (its checks across arguments: :func:`parse_args`)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='downstream evaluation config (val_dataloader + val_evaluator)')
    parser.add_argument('checkpoint', help='supernet distillation checkpoint (tools/train.py output)')
    parser.add_argument('--stage', type=int, choices=(1, 2), default=1)
    parser.add_argument('--head-checkpoint', help='the teacher\'s trained downstream head (e.g. its probe run)')
    parser.add_argument('--metric', default='mIoU',
                        help='the val_evaluator\'s metric to optimise: mIoU (default), aAcc, mAcc, mDice (mmseg '
                        'IoUMetric), coco/bbox_mAP, coco/segm_mAP (mmdet CocoMetric), the depth metrics (abs_rel, '
                        'delta1; da2k_acc), any metric a registered evaluator declares in `higher_is_better`; or '
                        'distill_loss (no labels). Its direction: the metric class\'s declaration, else mmengine\'s '
                        'CheckpointHook rule (the config\'s default_hooks.checkpoint.greater_keys / less_keys, e.g. '
                        'greater_keys=[\'mFscore\']). An unknown name is refused naming those of the config\'s '
                        'evaluator')
    parser.add_argument('--beam-width', type=positive, default=4)
    parser.add_argument('--min-gain', type=finite(), default=None,
                        help='Step 1: stop when a stage gains less, in the metric\'s units, and keep none of that '
                             'stage\'s moves (default: 0.1 for a percent metric such as mIoU, 0.001 for a fraction '
                             'such as COCO mAP or AbsRel)')
    parser.add_argument('--max-full', type=count_arg, default=None, help='Step 2: at most this many F layers')
    parser.add_argument('--tolerance', type=finite(), default=None,
                        help='Step 2: stop at the first stage whose best arch scores at least teacher score - '
                             'tolerance, in the metric\'s units (default: 0.5 for a percent metric, 0.005 for a '
                             'fraction). A negative tolerance puts the target above the teacher\'s score: the '
                             'search then stops on the score only where an arch beats the teacher by |tolerance|, '
                             'else at --max-full or when no move is left, returning the best arch scored')
    parser.add_argument('--step1-order', default=None,
                        help='Step 1: the efficient kinds from the cheapest to the dearest, e.g. LPW (the search '
                             'starts with every layer at its cheapest and moves layers to dearer kinds); "latency": '
                             'by the latency table; default: the order the model declares them in (L, W)')
    parser.add_argument('--step1-arch', type=arch_string,
                        help='Step 2 start (default: Step 1\'s best from the work dir state)')
    parser.add_argument('--latency-budget', type=finite(above=0), default=None, help='max predicted latency, ms')
    parser.add_argument('--latency-size', type=positive, nargs=2, default=None, metavar=('H', 'W'),
                        help='input size of the latency model (default: the first val batch after the data '
                             'preprocessor, rounded up to whole patches)')
    parser.add_argument('--latency-table', type=Path, default=None,
                        help='cost archs with this latency table instead of measuring one here: a search\'s '
                             'latency_table.json or {"base", "F", "L", "W", ...} (every declared letter) in ms, e.g. '
                             'measured on the deployment '
                             'device at the deployment size')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--seed', type=count_arg, default=0)
    parser.add_argument('--resume', action='store_true', help='continue the search saved in the work dir')
    parser.add_argument('--work-dir', default=None)
    parser.add_argument('--export', action='store_true', help='export the best arch of this stage')
    parser.add_argument('--distill-config', help='with --export: the distillation config the fine-tune config inherits')
    parser.add_argument('--cfg-options', nargs='+', action=ConfigOptions)
    parser.add_argument('--launcher', choices=LAUNCHERS, default='none',
                        help='job launcher: under torchrun (pytorch) every process scores each arch over its split '
                             'of the val set; rank 0 writes the state and the outputs')
    parser.add_argument('--local_rank', '--local-rank', type=integer(minimum=0), default=0)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_common_args(parser, args, files=('checkpoint', 'head_checkpoint', 'distill_config', 'latency_table'))
    if args.stage == 1 and (args.max_full is not None or args.tolerance is not None or args.step1_arch):
        parser.error('--max-full, --tolerance and --step1-arch are Step 2 options: pass --stage 2, or drop them')
    if args.stage == 2 and args.min_gain is not None:
        parser.error('--min-gain is a Step 1 option: pass --stage 1, or drop it')
    if args.distill_config and not args.export:
        parser.error('--distill-config is used by --export only: pass --export, or drop it')
    if args.step1_arch is not None:  # the letters the config's backbone declares (a plugin's too), one per layer
        cfg = read_config(args.config, args.cfg_options, 'search')
        check_arch_letters(parser, '--step1-arch', args.step1_arch, declared_letters(cfg), declared_depth(cfg))
    return args


def search_config(args: argparse.Namespace) -> Config:
    """CONFIG with the search as its validation loop (:class:`~jetvit_mm.mm.search.loop.JetViTSearchLoop`, every
    flag an option of it) and a backbone that loads no weights (the loop swaps in the supernet and the teacher)."""
    cfg = read_config(args.config, args.cfg_options, 'search')
    work_dir = str(args.work_dir or Path('work_dirs') / f'search_{Path(args.config).stem}')
    cfg.work_dir, cfg.launcher = work_dir, args.launcher
    cfg.val_cfg = dict(
        type='JetViTSearchLoop', checkpoint=str(args.checkpoint), stage=args.stage, metric=args.metric,
        head_checkpoint=None if args.head_checkpoint is None else str(args.head_checkpoint),
        beam_width=args.beam_width, min_gain=args.min_gain, tolerance=args.tolerance, max_full=args.max_full,
        latency_budget=args.latency_budget, latency_size=args.latency_size,
        latency_table=None if args.latency_table is None else str(args.latency_table),
        step1_order=args.step1_order, step1_arch=args.step1_arch, seed=args.seed, resume=args.resume,
        device=args.device, work_dir=work_dir, export=args.export,
        distill_config=None if args.distill_config is None else str(args.distill_config))
    if cfg.model.backbone.get('checkpoint') is not None:
        cfg.model.backbone.checkpoint = None  # a placeholder: the teacher's weights come from CHECKPOINT
    cfg.load_from, cfg.resume = None, False  # the runner's own loading: nothing (the loop loads what it scores)
    return cfg


def main(argv=None) -> dict:
    """Search; under torchrun each rank dies with the launcher, and rank 0 (the writer) holds the work dir's lock
    (``search.lock``): a second search there is refused, naming the holder's pid."""
    if os.environ.get('TORCHELASTIC_RUN_ID') is not None:  # a rank torchrun started, in a session of its own
        die_with_parent(PARENT)
    args = parse_args(argv)
    cfg = search_config(args)
    if args.latency_table is not None:  # a bad table is refused before the runner builds or loads anything
        read_latency_table(Path(args.latency_table), declared_letters(cfg))
    writer = args.launcher == 'none' or (os.environ.get('RANK') or os.environ.get('SLURM_PROCID') or '0') == '0'
    with work_dir_lock(cfg.work_dir, 'tools/search.py') if writer else contextlib.nullcontext():
        with process_group_teardown():
            return build_runner(cfg).val()


if __name__ == '__main__':
    run_main(main)
