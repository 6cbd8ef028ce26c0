"""The device check's Python phases (scripts/gpu_check.sh runs them; they need torch + timm only, no mmengine).

    python tools/gpu_check.py env [--json PATH]
        versions, the GPU, and the SDPA backend the teacher's F layers take at DINOv3-B 1024x2048 (bf16 and fp32)
    python tools/gpu_check.py kernels [--device cuda] [--quick] [--dtype bf16] [--kernel triton] [--fp32 grad]
                                      [--log PATH] [--json PATH]
        every fast mixer path against the torch path (jetvit_mm/benchmark/kernel_check.py), a line per case as it
        ends; exit 1 on a mismatch or a case whose fast path did not run
    python tools/gpu_check.py baselines MODELS.json MODELS_COMPILED.json [--json PATH]
        every arch's median, eager and compiled, against the fastest eager and the fastest compiled teacher
    torchrun --nproc_per_node=N tools/gpu_check.py dist --wrap ddp [--wrap fsdp2] [--json PATH]
        one distillation step of a tiny supernet on NCCL (gloo without CUDA), through DDP or FSDP2
"""
import argparse
import atexit
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def write_json(path, data) -> None:
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=1, default=str))


def sdpa_backend(device: torch.device, dtype: torch.dtype, tokens: int = 8197, heads: int = 12, head_dim: int = 64):
    """The SDPA backend torch picks for one F layer's attention at this shape (what the teacher runs)."""
    from torch.nn.attention import SDPBackend
    q = torch.empty(1, heads, tokens, head_dim, device=device, dtype=dtype)
    return SDPBackend(torch._fused_sdp_choice(q, q, q)).name


def environment() -> dict:
    import numpy

    from jetvit_mm.benchmark.host import machine_record
    info = dict(machine_record(torch.device('cpu'), cpu_count=True), numpy=numpy.__version__, cuda=torch.version.cuda)
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    if device.type == 'cuda':
        info['gpu'] = torch.cuda.get_device_name()
        info['capability'] = '.'.join(map(str, torch.cuda.get_device_capability()))
        info['cudnn_sdp_enabled'] = torch.backends.cuda.cudnn_sdp_enabled()
    info['sdpa_backend'] = {name: sdpa_backend(device, dtype)
                            for name, dtype in (('bf16', torch.bfloat16), ('fp32', torch.float32))}
    return info


def cmd_env(args) -> int:
    info = environment()
    print(json.dumps(info, indent=1))
    write_json(args.json, info)
    return 0


def cmd_kernels(args) -> int:
    from jetvit_mm.benchmark.kernel_check import result_line, run_checks, summary
    if args.log is not None:
        args.log.parent.mkdir(parents=True, exist_ok=True)

    def report(result: dict) -> None:  # each case's line as it ends: a timeout keeps the cases that ran
        line = result_line(result)
        print(line, flush=True)
        if args.log is not None:
            with open(args.log, 'a') as f:
                f.write(line + '\n')

    results = run_checks(torch.device(args.device), dtypes=args.dtype or ('bf16', 'fp32'), quick=args.quick,
                         kernels=args.kernel, fp32=args.fp32, report=report)
    print(summary(results))
    write_json(args.json, results)
    return 0 if all(r['ok'] for r in results) else 1


def teacher_ratios(eager: dict, compiled: dict) -> list:
    """Every arch of a `models` result run eagerly and one run compiled (``--compile``), each variant's median
    against the fastest eager teacher and the fastest compiled teacher of its size: the compiled teacher is the fair
    baseline (an eager teacher spends ~3.3 of its 13.2 ms on RoPE's elementwise ops at 1024x2048 on the H200)."""
    times = {mode: {(r['size'], r['label']): r['median_ms'] for r in result['rows']}
             for mode, result in (('eager', eager), ('compiled', compiled))}
    fastest = {}
    for mode, rows in times.items():
        for (size, label), ms in rows.items():
            if label.startswith('teacher'):
                fastest[mode, size] = min(ms, fastest.get((mode, size), ms))
    out = []
    for mode, rows in times.items():
        for (size, label), ms in rows.items():
            ratios = {f'x_vs_{ref}_teacher': fastest[ref, size] / ms for ref in times if (ref, size) in fastest}
            out.append(dict(size=size, label=label, run=mode, median_ms=ms, **ratios))
    return out


def cmd_baselines(args) -> int:
    from jetvit_mm.benchmark.targets import baseline_targets, print_targets
    missing = [str(p) for p in (args.eager, args.compiled) if not p.is_file()]
    if missing:
        print(f'baselines: no result at {", ".join(missing)} (its phase did not finish)')
        return 1
    rows = teacher_ratios(json.loads(args.eager.read_text()), json.loads(args.compiled.read_text()))
    print('| size | arch | run | median ms | vs eager teacher | vs compiled teacher |')
    print('|---|---|---|---:|---:|---:|')
    for r in rows:
        ratios = [f'x{r[k]:.2f}' if k in r else '-' for k in ('x_vs_eager_teacher', 'x_vs_compiled_teacher')]
        print(f'| {r["size"]} | {r["label"]} | {r["run"]} | {r["median_ms"]:.2f} | {" | ".join(ratios)} |')
    print_targets(baseline_targets(rows))
    write_json(args.json, rows)
    return 0


def distill_step(wrap: str, device: torch.device) -> dict:
    """One SGD step of a tiny LWF supernet distilled from its teacher, wrapped as ``wrap`` (``'ddp'``: the student;
    ``'fsdp2'``: teacher and student, one unit per block, bf16 parameters on CUDA), through the pure
    :class:`~jetvit_mm.distill.distiller.Distiller`."""
    from torch.nn.parallel import DistributedDataParallel

    from jetvit_mm.distill.distiller import Distiller
    from jetvit_mm.distill.fsdp2 import shard_model
    from jetvit_mm.models.jetvit import JetViT
    from jetvit_mm.models.mixers import default_mixers
    from jetvit_mm.models.supernet import JetViTSupernet
    backbone = dict(model_name='dinov3_vits16', embed_dim=64, depth=4, num_heads=4,
                    mixers=default_mixers(W=dict(window_size=2)))
    torch.manual_seed(0)
    teacher = JetViT(**backbone, frozen=True)
    with torch.no_grad():  # LayerScale 1e-5 makes a random ViT near the identity: make every block count
        for name, p in teacher.named_parameters():
            if name.endswith('gamma'):
                p.fill_(0.5)
    student = JetViTSupernet(search_space='LWF', **backbone)
    student.load_jetvit_state_dict(teacher.state_dict(), source='teacher weights')
    student.set_arch('LWFL')
    model = Distiller(teacher, student, indices=[1, 3]).to(device)
    if wrap == 'ddp':  # the frozen teacher's parameters need no grad, so DDP leaves them alone
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == 'cuda' else None,
                                        find_unused_parameters=True)
        units = 1
    else:
        units = shard_model(model, param_dtype=torch.bfloat16 if device.type == 'cuda' else None,
                            reduce_dtype=torch.float32)
    optim = torch.optim.SGD([p for p in student.parameters() if p.requires_grad], lr=0.1)
    x = torch.randn(2, 3, 64, 96, generator=torch.Generator().manual_seed(dist.get_rank())).to(device)
    start = time.perf_counter()
    loss = model(x)
    loss.backward()
    optim.step()
    if device.type == 'cuda':
        torch.cuda.synchronize()
    return dict(wrap=wrap, loss=loss.item(), loss_dtype=str(loss.dtype), units=units,
                seconds=round(time.perf_counter() - start, 3), finite=bool(torch.isfinite(loss) and loss > 0))


def cmd_dist(args) -> int:
    """One step per ``--wrap``, each model freed (its DDP / FSDP2 state with it) before the process group is
    destroyed: left to the garbage collector at exit, the FSDP2 model held the process over 10 s after its result on
    the H200 (NCCL, 2026-12-04)."""
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get('LOCAL_RANK', 0)))
    dist.init_process_group('nccl' if cuda else 'gloo')
    try:
        device = torch.device('cuda', torch.cuda.current_device()) if cuda else torch.device('cpu')
        results = []
        for wrap in args.wrap:
            results.append(dict(distill_step(wrap, device), backend=dist.get_backend(), world=dist.get_world_size()))
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


def main(argv=None, leave: Callable[[int], None] = os._exit) -> int:
    """Run one phase. ``dist`` leaves through ``leave`` once its group is destroyed, the exit handlers have run and
    the output is flushed, without the interpreter's finalization: what outlives the group there (torch keeps device
    meshes, and their process groups, in a global) is collected at finalization, where the FSDP2 process sat over 10 s
    after its result on the H200 (NCCL, 2026-12-04); as ``jetvit_mm.mm.engine.launch.run_main`` does for the tools."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest='command', required=True)
    env = sub.add_parser('env', help='versions, GPU, SDPA backend of the F layers')
    env.add_argument('--json', type=Path, default=None, help='also write the facts here')
    kernels = sub.add_parser('kernels', help='every fast path against the torch path')
    kernels.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu', choices=('cpu', 'cuda'))
    kernels.add_argument('--dtype', action='append', choices=('fp32', 'bf16'), default=None,
                         help='the dtypes to check, in this order (repeatable; default bf16, then fp32)')
    kernels.add_argument('--kernel', action='append', choices=('triton', 'flex', 'compile', 'auto'), default=None,
                         help="the fast paths to check (repeatable; 'auto': the whole model; default all)")
    kernels.add_argument('--fp32', choices=('all', 'grad'), default='all',
                         help="'grad': of the fp32 cases only the backward's (default all)")
    kernels.add_argument('--log', type=Path, default=None, help='append each case\'s line here as it ends')
    kernels.add_argument('--quick', action='store_true', help='the whole model and one compiled L case per dtype '
                         '(the CPU dry run)')
    kernels.add_argument('--json', type=Path, default=None, help='also write every case\'s result here')
    base = sub.add_parser('baselines', help='every arch against the eager and the compiled teacher')
    base.add_argument('eager', type=Path, help='a `tools/benchmark.py models` JSON, eager')
    base.add_argument('compiled', type=Path, help='the same with --compile')
    base.add_argument('--json', type=Path, default=None, help='also write the rows here')
    step = sub.add_parser('dist', help='one distillation step under torchrun (NCCL on CUDA)')
    step.add_argument('--wrap', choices=('ddp', 'fsdp2'), action='append', required=True,
                      help='how the model is wrapped (repeatable: one step each, in order)')
    step.add_argument('--json', type=Path, default=None, help='rank 0 writes the step\'s result here')
    args = parser.parse_args(argv)
    code = {'env': cmd_env, 'kernels': cmd_kernels, 'baselines': cmd_baselines, 'dist': cmd_dist}[args.command](args)
    if args.command == 'dist':
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        leave(code)
    return code


if __name__ == '__main__':
    sys.exit(main())
