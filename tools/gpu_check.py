"""The device check's Python phases (scripts/gpu_check.sh runs them; torch + timm only, no mmengine).

    python tools/gpu_check.py env [--json PATH]
        versions, the GPU, and the SDPA backend the teacher's F layers take at DINOv3-B 1024x2048 (bf16 and fp32)
    python tools/gpu_check.py kernels [--device cuda] [--production | --quick] [--dtype bf16] [--kernel triton]
                                      [--fp32 grad] [--log PATH] [--json PATH]
        the fast mixer paths against the torch path (jetvit_mm/benchmark/kernel_check.py), a line per case as it
        ends; --production: the production shape and the 2F model first (what settles the most); exit 1 on a
        mismatch or a case whose fast path did not run (the self-check verdicts read)
    python tools/gpu_check.py baselines MODELS.json [MODELS.json ...] [--json PATH]
        every arch's median, eager and compiled, against the fastest eager and the fastest compiled teacher
    torchrun --nproc_per_node=N tools/gpu_check.py dist --wrap ddp [--wrap fsdp2] [--json PATH]
        one distillation step of a tiny supernet on NCCL (gloo without CUDA), through DDP or FSDP2, torch paths
    python tools/gpu_check.py summary WORK_DIR --json PATH
        the run's summary (each phase's budget, seconds and outcome; each kernel case and the paths it ran; the
        distillation step's paths by the verdicts; the baselines): stdlib only, written after every phase
"""
import argparse
import json
import os
import sys
from pathlib import Path


def write_json(path, data) -> None:
    if path is not None:
        from jetvit_mm.jsonio import write_json_atomic
        write_json_atomic(path, data)


def cmd_env(args) -> int:
    from jetvit_mm.benchmark.device_check import environment
    info = environment()
    print(json.dumps(info, indent=1))
    write_json(args.json, info)
    return 0


def cmd_kernels(args) -> int:
    import torch

    from jetvit_mm.benchmark.kernel_check import result_line, run_checks, summary

    def report(result: dict) -> None:  # each case's line as it ends: a timeout keeps the cases that ran
        line = result_line(result)
        print(line, flush=True)
        if args.log is not None:
            args.log.parent.mkdir(parents=True, exist_ok=True)
            with open(args.log, 'a') as f:
                f.write(line + '\n')

    results = run_checks(torch.device(args.device), dtypes=args.dtype or ('bf16', 'fp32'), quick=args.quick,
                         kernels=args.kernel, fp32=args.fp32, report=report, production=args.production)
    print(summary(results))
    write_json(args.json, results)
    return 0 if all(r['ok'] for r in results) else 1


def cmd_baselines(args) -> int:
    from jetvit_mm.benchmark.device_check import teacher_ratios
    from jetvit_mm.benchmark.targets import baseline_targets, print_targets
    missing = [str(p) for p in args.results if not p.is_file()]
    if missing:
        print(f'baselines: no result at {", ".join(missing)} (its phase did not finish)')
        return 1
    rows = teacher_ratios([json.loads(p.read_text()) for p in args.results])
    print('| size | arch | run | median ms | vs eager teacher | vs compiled teacher |')
    print('|---|---|---|---:|---:|---:|')
    for r in rows:
        ratios = [f'x{r[k]:.2f}' if k in r else '-' for k in ('x_vs_eager_teacher', 'x_vs_compiled_teacher')]
        print(f'| {r["size"]} | {r["label"]} | {r["run"]} | {r["median_ms"]:.2f} | {" | ".join(ratios)} |')
    print_targets(baseline_targets(rows))
    write_json(args.json, rows)
    return 0


def cmd_dist(args) -> int:
    """One step per ``--wrap``, each model freed (its DDP / FSDP2 state with it) before the process group is
    destroyed: left to the garbage collector at exit, the FSDP2 model held the process over 10 s after its result on
    the H200 (NCCL, 2026-12-04)."""
    import gc

    import torch
    import torch.distributed as dist

    from jetvit_mm.benchmark.device_check import distributed_step
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get('LOCAL_RANK', 0)))
    dist.init_process_group('nccl' if cuda else 'gloo')
    try:
        device = torch.device('cuda', torch.cuda.current_device()) if cuda else torch.device('cpu')
        results = []
        for wrap in args.wrap:
            results.append(dict(distributed_step(wrap, device), backend=dist.get_backend(),
                                world=dist.get_world_size()))
            gc.collect()  # the step's model is unreachable now, but FSDP2's hooks hold it in reference cycles
        if dist.get_rank() == 0:
            print(json.dumps(results, indent=1), flush=True)
            write_json(args.json, results)
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0 if all(r['finite'] for r in results) else 1


def _read(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def cmd_summary(args) -> int:
    """The summary of a device check's work dir: ``phases.tsv`` (name, budget, seconds, exit code per line) and the
    JSON files its phases wrote. Kernel cases carry the paths their mixers ran, the verdicts read; so do the
    distillation step's fast students."""
    files, table = args.work_dir / 'files', args.work_dir / 'phases.tsv'
    phases = []
    for line in table.read_text().splitlines() if table.is_file() else []:
        name, budget, seconds, rc = line.split('\t')
        phases.append(dict(phase=name, budget_s=int(budget), seconds=int(seconds), rc=int(rc),
                           outcome='passed' if rc == '0' else 'TIMED OUT' if rc == '124' else 'FAILED'))
    summary = dict(phases=phases, budget_s=sum(p['budget_s'] for p in phases),
                   seconds=sum(p['seconds'] for p in phases))
    for name in sorted(files.glob('kernels*.json')) if files.is_dir() else ():
        cases = _read(name) or []
        summary[name.stem] = [dict(case=c['name'], ok=c['ok'], paths=c.get('paths'), err=c.get('err'),
                                   bound=c.get('bound'), error=c.get('error')) for c in cases]
    distill = _read(files / 'distill_bf16.json')
    if distill:
        summary['distill'] = dict(ratio_median=distill.get('ratio_median'), fast_paths=distill.get('fast_paths'))
    baselines = _read(files / 'baselines.json')
    if baselines:
        summary['baselines'] = baselines
    write_json(args.json, summary)
    return 0


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest='command', required=True)
    env = sub.add_parser('env', help='versions, GPU, SDPA backend of the F layers')
    env.add_argument('--json', type=Path, default=None, help='also write the facts here')
    kernels = sub.add_parser('kernels', help='the fast paths against the torch path')
    kernels.add_argument('--device', default=None, choices=('cpu', 'cuda'), help='default: cuda if there is one')
    kernels.add_argument('--dtype', action='append', choices=('fp32', 'bf16'), default=None,
                         help='the dtypes to check, in this order (repeatable; default bf16, then fp32)')
    kernels.add_argument('--kernel', action='append', choices=('triton', 'flex', 'compile', 'auto'), default=None,
                         help="the fast paths to check (repeatable; 'auto': the whole model; default all)")
    kernels.add_argument('--fp32', choices=('all', 'grad'), default='all',
                         help="'grad': of the fp32 cases only the backward's (default all)")
    kernels.add_argument('--production', action='store_true',
                         help='the production shape (64x128 grid, ViT-B heads) and the 2F model, bf16 (first phase)')
    kernels.add_argument('--log', type=Path, default=None, help='append each case\'s line here as it ends')
    kernels.add_argument('--quick', action='store_true', help='small cases only (the CPU dry run)')
    kernels.add_argument('--json', type=Path, default=None, help='also write every case\'s result here')
    base = sub.add_parser('baselines', help='every arch against the eager and the compiled teacher')
    base.add_argument('results', type=Path, nargs='+', help='`tools/benchmark.py models` JSONs, eager and --compile')
    base.add_argument('--json', type=Path, default=None, help='also write the rows here')
    step = sub.add_parser('dist', help='one distillation step under torchrun (NCCL on CUDA)')
    step.add_argument('--wrap', choices=('ddp', 'fsdp2'), action='append', required=True,
                      help='how the model is wrapped (repeatable: one step each, in order)')
    step.add_argument('--json', type=Path, default=None, help='rank 0 writes the step\'s result here')
    summary = sub.add_parser('summary', help='the summary of a device check\'s work dir (stdlib only)')
    summary.add_argument('work_dir', type=Path, help='the work dir: phases.tsv and files/')
    summary.add_argument('--json', type=Path, required=True, help='write the summary here')
    args = parser.parse_args(argv)
    if args.command == 'kernels' and args.device is None:
        import torch
        args.device = 'cuda' if torch.cuda.is_available() else 'cpu'
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    commands = {'env': cmd_env, 'kernels': cmd_kernels, 'baselines': cmd_baselines, 'dist': cmd_dist,
                'summary': cmd_summary}
    return commands[args.command](args)


if __name__ == '__main__':
    code = main()
    if sys.argv[1:2] == ['dist']:  # leave without the interpreter's finalization (see cmd_dist): output flushed
        import logging
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
