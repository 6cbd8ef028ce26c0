"""The device check's Python phases (scripts/gpu_check.sh runs them; they need torch + timm only, no mmengine).

    python tools/gpu_check.py env [--json PATH]
        versions, the GPU, and the SDPA backend the teacher's F layers take at DINOv3-B 1024x2048 (bf16 and fp32)
    python tools/gpu_check.py kernels [--device cuda] [--quick] [--json PATH]
        every fast mixer path against the torch path (jetvit_mm/benchmark/kernel_check.py); exit 1 on a mismatch
    torchrun --nproc_per_node=N tools/gpu_check.py dist --wrap ddp [--wrap fsdp2] [--json PATH]
        one distillation step of a tiny supernet on NCCL (gloo without CUDA), through DDP or FSDP2
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

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
    from jetvit_mm.benchmark.kernel_check import run_checks, summary
    results = run_checks(torch.device(args.device), dtypes=args.dtype or ('fp32', 'bf16'), quick=args.quick)
    for r in results:
        print(f'{"ok  " if r["ok"] else "FAIL"} {r["name"]}: err {r["err"]:.3g} bound {r["bound"]:.3g} '
              f'({r["seconds"]} s) {r.get("error", "")}'.rstrip(), flush=True)
    print(summary(results))
    write_json(args.json, results)
    return 0 if all(r['ok'] for r in results) else 1


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
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get('LOCAL_RANK', 0)))
    dist.init_process_group('nccl' if cuda else 'gloo')
    try:
        device = torch.device('cuda', torch.cuda.current_device()) if cuda else torch.device('cpu')
        results = [dict(distill_step(wrap, device), backend=dist.get_backend(), world=dist.get_world_size())
                   for wrap in args.wrap]
        if dist.get_rank() == 0:
            print(json.dumps(results, indent=1), flush=True)
            write_json(args.json, results)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0 if all(r['finite'] for r in results) else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest='command', required=True)
    env = sub.add_parser('env', help='versions, GPU, SDPA backend of the F layers')
    env.add_argument('--json', type=Path, default=None, help='also write the facts here')
    kernels = sub.add_parser('kernels', help='every fast path against the torch path')
    kernels.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu', choices=('cpu', 'cuda'))
    kernels.add_argument('--dtype', action='append', choices=('fp32', 'bf16'), default=None,
                         help='the dtypes to check (repeatable; default both)')
    kernels.add_argument('--quick', action='store_true', help='the whole model and one compiled L case per dtype '
                         '(the CPU dry run)')
    kernels.add_argument('--json', type=Path, default=None, help='also write every case\'s result here')
    step = sub.add_parser('dist', help='one distillation step under torchrun (NCCL on CUDA)')
    step.add_argument('--wrap', choices=('ddp', 'fsdp2'), action='append', required=True,
                      help='how the model is wrapped (repeatable: one step each, in order)')
    step.add_argument('--json', type=Path, default=None, help='rank 0 writes the step\'s result here')
    args = parser.parse_args(argv)
    return {'env': cmd_env, 'kernels': cmd_kernels, 'dist': cmd_dist}[args.command](args)


if __name__ == '__main__':
    sys.exit(main())
