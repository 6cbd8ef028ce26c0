"""The whole JetViT method in one resumable command.

    python tools/pipeline.py CONFIG --teacher CKPT --work-dir W [--data-root D] [--launcher pytorch] \\
        [--until STAGE] [--plan] [--overwrite]

CONFIG is the Step-1 distillation config (configs/jetvit/*.py for segmentation, configs/depth/*_distill.py for
depth; detection: a segmentation distillation config with --task det). The task decides the downstream config
the teacher is probed with and the search scores with, and the metric (--probe-config / --metric override them).
Stages, each in its own folder under W:

  seg, det: probe_teacher (tools/train.py, the probe config on the teacher), test_teacher (tools/test.py)
  depth:    convert_teacher (tools/convert_depth_anything.py), test_teacher (the evaluation config)
  step1_distill (tools/train.py CONFIG), step1_search (tools/search.py --stage 1),
  step2_distill (CONFIG's _step2.py, or CONFIG with model.student.search_space=None; the Step-1 arch),
  step2_search (tools/search.py --stage 2 --export), finetune (the exported finetune_<ARCH>.py; depth: the
  pseudo-label config), probe_hybrid + test_hybrid (depth: test_hybrid), report (W/report/report.md).

A stage is skipped when its folder holds its marker, its inputs (command, configs with their bases, files it
names, every file under --data-root for the stages that read it, the stages before it) are unchanged and the outputs
the marker recorded (the checkpoint last_checkpoint names, metrics.json, the search state, the report) are there
unchanged; otherwise it runs again, saying why, and so does everything after it whose inputs changed. A killed run
resumes at the stage it was killed in (a train stage with --resume from its last checkpoint). Nothing is deleted that
the pipeline did not write: a stage folder that would be rewritten and holds other files is refused before any stage
runs (--overwrite replaces it), and a stage run again keeps its previous outputs in W/.<stage>.previous until the new
ones are complete. Killed by any signal (kill -9 included), the pipeline takes its running stage with it, and no
second run starts in W while a process of a stage is alive. --plan prints every command,
copy-pastable, with its time estimate (iterations x a step time: logged by an earlier run in W, or measured now with
--measure-steps N) and whether it would be skipped, and runs nothing else.
"""
import argparse
import tempfile
from pathlib import Path

from jetvit_mm.cli import check_inputs, check_outputs, positive, run_main
from jetvit_mm.pipeline import stages as method
from jetvit_mm.pipeline.engine import Workflow

STAGES = ('probe_teacher', 'convert_teacher', 'test_teacher', 'step1_distill', 'step1_search', 'step2_distill',
          'step2_search', 'finetune', 'probe_hybrid', 'test_hybrid', 'report')


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='the Step-1 supernet distillation config')
    parser.add_argument('--teacher', required=True, help='the teacher checkpoint (official, timm or HF weights)')
    parser.add_argument('--work-dir', required=True, type=Path, help='every stage writes its own folder here')
    parser.add_argument('--data-root', type=Path, help='data_root of every dataloader of every stage\'s config')
    parser.add_argument('--launcher', choices=('none', 'pytorch'), default='none',
                        help='pytorch: train stages run with torchrun --nproc_per_node=GPUS ... --launcher pytorch')
    parser.add_argument('--gpus', type=positive, default=8, help='processes per train stage with --launcher pytorch')
    parser.add_argument('--until', choices=STAGES, help='stop after this stage')
    parser.add_argument('--plan', action='store_true', help='print the commands and estimates; run nothing')
    parser.add_argument('--measure-steps', type=positive, default=None,
                        help='with --plan: time this many iterations of each train stage whose inputs exist')
    parser.add_argument('--task', choices=method.TASKS, help='default: depth for configs/depth, else seg')
    parser.add_argument('--probe-config', type=Path, help='the downstream config (default: by task and name)')
    parser.add_argument('--step2-config', type=Path, help='default: CONFIG\'s _step2.py if there is one')
    parser.add_argument('--metric', help='the search\'s metric (default: mIoU, da2k_acc or coco/bbox_mAP)')
    parser.add_argument('--max-iters', type=positive, help='every train stage at this many iterations (a smoke run)')
    parser.add_argument('--beam-width', type=positive, default=4)
    parser.add_argument('--max-full', type=positive, default=2, help='Step 2: at most this many F layers')
    parser.add_argument('--device', help='the search\'s device (default: CUDA when available)')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace stage folders that hold files the pipeline did not write (refused otherwise)')
    args = parser.parse_args(argv)
    check_inputs(parser, args, files=('config', 'teacher', 'probe_config', 'step2_config'))
    if args.data_root is not None and not args.data_root.is_dir():
        parser.error(f'--data-root {args.data_root}: no such folder')
    check_outputs(parser, args, dirs=('work_dir', ))
    return args


def measured_step_times(stages, wf: Workflow, steps: int) -> dict:
    """Seconds per iteration of each train stage whose inputs exist, from ``steps`` iterations run now in a
    scratch folder (a stage already logged in W keeps its logged time)."""
    times = {}
    for stage in stages:
        logged = method.logged_step_time(stage.out_dir)
        if logged is not None and stage.iterations:
            times[stage.name] = (logged, f'logged by the run in {stage.out_dir}')
        elif stage.iterations and steps:
            try:
                argv = stage.argv()
            except FileNotFoundError:
                continue  # made by an earlier stage: not there yet
            with tempfile.TemporaryDirectory() as scratch:
                i = argv.index('--work-dir')
                argv[i + 1] = scratch
                argv += [f'train_cfg.max_iters={steps}', 'default_hooks.logger.interval=1']
                probe = type(stage)(stage.name, Path(scratch), argv)
                wf.execute(probe, argv)
                seconds = method.logged_step_time(Path(scratch))
            if seconds is not None:
                times[stage.name] = (seconds, f'measured now: {steps} iterations on this machine')
    for stage in stages:  # a stage whose inputs are not made yet: the time of a stage running the same config
        same = [s for s in stages if s.name in times and s.timing_key and s.timing_key == stage.timing_key]
        if stage.iterations and stage.name not in times and same:
            seconds, source = times[same[0].name]
            times[stage.name] = (seconds, f'{same[0].name}\'s, the same config: {source}')
    return times


def main(argv=None) -> None:
    args = parse_args(argv)
    profile = method.task_profile(args.config, args.task, args.probe_config, args.step2_config, args.metric)
    opts = method.MethodOptions(Path(args.config).resolve(), Path(args.teacher).resolve(), args.work_dir.resolve(),
                                profile, args.data_root.resolve() if args.data_root else None, args.launcher,
                                args.gpus, args.max_iters, args.beam_width, args.max_full, args.device)
    stages = method.method_stages(opts)
    if args.until and args.until not in [s.name for s in stages]:
        raise SystemExit(f'error: --until {args.until}: no such stage for task {profile.task}; valid: '
                         f'{", ".join(s.name for s in stages)}')
    wf = Workflow(opts.work_dir, cwd=method.REPO, log=lambda m: print(f'[pipeline] {m}', flush=True),
                  overwrite=args.overwrite)
    if args.plan:
        print(method.plan_text(wf, stages, measured_step_times(stages, wf, args.measure_steps or 0)))
        return
    try:
        with wf.lock():
            wf.run_all(stages, args.until)
    except RuntimeError as e:
        raise SystemExit(f'error: {e}') from None
    if args.until in (None, 'report'):
        print((opts.work_dir / 'report' / 'report.md').read_text())


if __name__ == '__main__':
    run_main(main)
