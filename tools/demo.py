"""The embedded default: the whole JetViT pipeline on CPU, on a generated task where global context matters.

    python tools/demo.py [--work-dir work_dirs/demo] [--jobs 2] [--ablation] [--plan]

1. generate the context task (``jetvit_mm.demo.context_seg``, Cityscapes layout, 64x128 images, 512 train /
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
5. the alternatives a user would pick instead, probed the same way: the teacher with training-free token
   clustering at two strengths (``jetvit_mm.models.token_reduction``; tuned near the 2-F and all-L speeds) and a
   smaller teacher, half the width, trained with the teacher's recipe and steps
   (``configs/demo/teacher_small_context_seg.py``, cached as the teacher);
6. latency of the same archs at 1024x2048 with DINOv3-B shapes on this machine: one block of each mixer timed
   (batch 1, fp32, interleaved rounds, median), summed per arch (``jetvit_mm.search.latency.predict_latency``);
   in the same rounds an F block on the clusters, the clustering and the reconstruction (token clustering) and the
   base and F block of DINOv3-S (the smaller teacher's shapes); measured after every other step and cached in the
   work dir.

Every tool runs as a user would run it, in its own process with one thread (``--threads``), ``--jobs`` at a time
where the steps do not depend on each other. The demo is a task configuration of the method's one list of stages,
the one ``tools/pipeline.py`` runs (``jetvit_mm.pipeline.stages``), with its own stages after them
(``jetvit_mm.demo.run``); each stage has its own folder (``pipeline/<stage>``, its log ``stage.log`` there), and
a rerun in the same work dir skips every stage done with the same inputs and resumes a killed one (``--plan`` prints
them, and whether each would be skipped, and runs nothing). One thread per process makes the figures reproducible:
the same seed gives the same table (the latency table is a measurement: cached after the first run, measured again
when the model code changes).
Outputs in the work dir: ``results.md`` / ``results.json`` (the table), ``pareto_step{1,2}.png`` and
``layer_gains_step{1,2}.png`` (the search's own plots, toy latency), ``pareto_dinov3b_1024x2048.png`` (left: the
searched archs against their DINOv3-B latency at 1024x2048; right: every row of the table, alternatives included,
probe mIoU against latency), the method's own report in ``pipeline/report``.
About 6-9 minutes on 2 idle CPU cores (teachers' training included), more when other jobs load the machine.
``--ablation`` adds the weight-inheritance comparison of docs/toy_reproduction.md (all-L distilled from the
teacher with every teacher weight vs only the MLPs inherited, same steps, same probe).
"""
import argparse
from pathlib import Path
from typing import Tuple

from jetvit_mm.cli import check_outputs, finite, positive, run_main
from jetvit_mm.cli import count as count_arg
from jetvit_mm.demo.context_seg import TASKS
from jetvit_mm.demo.run import DemoOptions, plan_demo, run_demo


def parse_args(argv=None) -> Tuple[DemoOptions, bool]:
    d = DemoOptions()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--work-dir', type=Path, default=d.work_dir)
    parser.add_argument('--seed', type=count_arg, default=d.seed,
                        help='dataset seed (the runs use the configs\' seed 0)')
    parser.add_argument('--task', choices=TASKS, default=d.task,
                        help='the generated task (jetvit_mm.demo.context_seg): partner (default) or corner')
    parser.add_argument('--jobs', type=positive, default=d.jobs, help='tools run at the same time')
    parser.add_argument('--threads', type=positive, default=d.threads, help='torch threads per tool process')
    parser.add_argument('--train-images', type=positive, default=d.train_images)
    parser.add_argument('--val-images', type=positive, default=d.val_images)
    parser.add_argument('--distill-iters', type=positive, default=d.distill_iters, help='each supernet distillation')
    parser.add_argument('--finetune-iters', type=positive, default=d.finetune_iters,
                        help='fine-tune of each arch of the table')
    parser.add_argument('--probe-iters', type=positive, default=d.probe_iters,
                        help='linear probe (default: the config\'s)')
    parser.add_argument('--teacher-iters', type=positive, default=d.teacher_iters,
                        help='teacher training (default: the config\'s)')
    parser.add_argument('--beam-width', type=positive, default=d.beam_width)
    parser.add_argument('--min-gain', type=finite(), default=d.min_gain, help='Step-1 search plateau (mIoU)')
    parser.add_argument('--latency-threads', type=positive, default=d.latency_threads,
                        help='torch threads for the 1024x2048 latency table')
    parser.add_argument('--latency-repeat', type=positive, default=d.latency_repeat)
    parser.add_argument('--no-latency', action='store_true', help='skip the 1024x2048 latency table')
    parser.add_argument('--ablation', action='store_true',
                        help='also run the weight-inheritance comparison (all-L, inherit all vs MLP only)')
    parser.add_argument('--quiet', action='store_true')
    parser.add_argument('--plan', action='store_true', help='print the stages and their commands; run nothing')
    args = parser.parse_args(argv)
    check_outputs(parser, args, dirs=('work_dir', ))
    plan = vars(args).pop('plan')
    try:
        return DemoOptions(**vars(args)), plan
    except ValueError as e:
        parser.error(str(e))


def main(argv=None) -> dict:
    opts, plan = parse_args(argv)
    if plan:
        print(plan_demo(opts))
        return {}
    return run_demo(opts)


if __name__ == '__main__':
    run_main(main)
