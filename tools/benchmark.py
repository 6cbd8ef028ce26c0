"""Benchmarks (not tests): one subcommand per thing measured.

    python tools/benchmark.py mixers [--grid 64 128] [--dim 768] [--heads 12] [--batch 1] [--prefix 5]
        [--window 16] [--warmup 2] [--repeat 5] [--dtype fp32|bf16] [--device cpu|cuda] [--threads N]
        [--no-rope] [--json PATH]

`mixers` times every token mixer alone (F, W, L with each conv variant, plus the bare qkv/proj projections
every mixer contains) and whole pre-norm blocks (mixer + timm Mlp ratio 4 + LayerNorms) for L-static vs
L-squeeze. Measurements are interleaved: each repeat runs every entry once (rotating the start), so slow drifts
of a shared machine hit all entries alike. Reports median, min and max per entry and checks the targets of
docs/benchmarks.md.

    python tools/benchmark.py distill-step [--model dinov3_vitb16] [--arch LWLWLWLWLWLW] [--size 256 512]
        [--batch 2] [--warmup 1] [--repeat 5] [--json PATH]

`distill-step` times one distillation training step of a supernet (path set to --arch) against a fixed-arch
student with the same arch, interleaved (the supernet's overhead target: at most 1.25x).
"""
import argparse
import datetime
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import torch
from timm.layers import Mlp, RotaryEmbeddingDinoV3
from torch import nn

from jetvit_mm.models.mixers import build_mixer

DTYPES = {'fp32': torch.float32, 'bf16': torch.bfloat16}
LINEAR_CONVS = ('none', 'static', 'squeeze', 'token')


class Projections(nn.Module):
    """Only the qkv and proj Linears every mixer owns: the floor under any mixer's latency."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor] = None):
        return self.proj(self.qkv(x)[..., : x.shape[-1]])


class Block(nn.Module):
    """Pre-norm ViT block around a mixer: x + mixer(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, dim: int, mixer: nn.Module, mlp_ratio: float = 4.) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-5)
        self.mixer = mixer
        self.norm2 = nn.LayerNorm(dim, eps=1e-5)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor] = None):
        x = x + self.mixer(self.norm1(x), grid_size, rope)
        return x + self.mlp(self.norm2(x))


def mixer_entries(args: argparse.Namespace) -> Dict[str, nn.Module]:
    """Everything `mixers` times, by display name."""
    common = dict(dim=args.dim, num_heads=args.heads, num_prefix_tokens=args.prefix)
    entries: Dict[str, nn.Module] = {
        'qkv+proj only': Projections(args.dim),
        'F': build_mixer('F', **common),
        f'W{args.window}': build_mixer('W', **common, window_size=args.window),
    }
    for conv in LINEAR_CONVS:
        entries[f'L-{conv}'] = build_mixer('L', **common, linear_cfg={'conv': conv})
    entries['L-squeeze focus3'] = build_mixer('L', **common, linear_cfg={'conv': 'squeeze', 'focusing': 3.0})
    for conv in ('static', 'squeeze'):
        entries[f'block L-{conv}'] = Block(args.dim, build_mixer('L', **common, linear_cfg={'conv': conv}))
    return entries


def make_timer(device: torch.device) -> Callable[[Callable[[], torch.Tensor]], float]:
    """Milliseconds of one call: CUDA events + synchronize on GPU, perf_counter on CPU."""
    if device.type == 'cuda':
        def timer(fn: Callable[[], torch.Tensor]) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            return start.elapsed_time(end)
        return timer

    def cpu_timer(fn: Callable[[], torch.Tensor]) -> float:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    return cpu_timer


def time_interleaved(
        calls: Dict[str, Callable[[], torch.Tensor]],
        timer: Callable[[Callable[[], torch.Tensor]], float],
        warmup: int,
        repeat: int,
) -> Dict[str, List[float]]:
    """Round-robin timing: every repeat runs each call once, the start rotating; warmup rounds are dropped."""
    names = list(calls)
    samples: Dict[str, List[float]] = {name: [] for name in names}
    for r in range(warmup + repeat):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            ms = timer(calls[name])
            if r >= warmup:
                samples[name].append(ms)
        print(f'  round {r + 1}/{warmup + repeat}{" (warmup)" if r < warmup else ""} done', flush=True)
    return samples


def summarize(samples: Dict[str, List[float]]) -> Dict[str, Dict[str, float]]:
    return {name: {'median_ms': statistics.median(s), 'min_ms': min(s), 'max_ms': max(s)}
            for name, s in samples.items()}


def check_targets(stats: Dict[str, Dict[str, float]]) -> List[Dict[str, object]]:
    """The targets of docs/benchmarks.md (medians; the token check also on minima)."""
    med = {name: s['median_ms'] for name, s in stats.items()}
    ratio_l_f = med['L-squeeze'] / med['F']
    block_overhead = med['block L-squeeze'] / med['block L-static'] - 1
    token_ratio = med['L-token'] / med['L-static']
    token_min_ratio = stats['L-token']['min_ms'] / stats['L-static']['min_ms']
    return [
        {'target': 'L-squeeze <= 1/20 of F', 'value': f'{ratio_l_f:.3f} (1/{1 / ratio_l_f:.1f})',
         'met': ratio_l_f <= 1 / 20},
        {'target': 'block: squeeze <= +5% over static', 'value': f'{block_overhead * 100:+.1f}%',
         'met': block_overhead <= 0.05},
        {'target': 'L-token measurably slower than L-static (>= +10% in median and in min)',
         'value': f'x{token_ratio:.2f} (median), x{token_min_ratio:.2f} (min)',
         'met': token_ratio >= 1.1 and token_min_ratio >= 1.1},
    ]


def run_mixers(args: argparse.Namespace) -> dict:
    if args.threads:
        torch.set_num_threads(args.threads)
    device, dtype = torch.device(args.device), DTYPES[args.dtype]
    torch.manual_seed(0)
    h, w = args.grid
    x = torch.randn(args.batch, args.prefix + h * w, args.dim, device=device, dtype=dtype)
    rope = None
    if not args.no_rope:
        rope = RotaryEmbeddingDinoV3(args.dim // args.heads, temperature=100).get_embed(shape=(h, w)).to(device)
    entries = {name: m.to(device=device, dtype=dtype).eval() for name, m in mixer_entries(args).items()}
    calls = {name: (lambda m=m: m(x, (h, w), rope)) for name, m in entries.items()}
    print(f'mixers: grid {h}x{w} (+{args.prefix} prefix), dim {args.dim}, {args.heads} heads, batch {args.batch}, '
          f'{args.dtype} on {args.device}, {torch.get_num_threads()} threads, rope {rope is not None}', flush=True)
    started = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    with torch.inference_mode():
        samples = time_interleaved(calls, make_timer(device), args.warmup, args.repeat)
    stats = summarize(samples)
    targets = check_targets(stats)
    print_table(stats, targets)
    result = {
        'command': 'mixers', 'args': {k: v for k, v in vars(args).items() if k != 'func'},
        'date': started,
        'machine': {'platform': platform.platform(), 'processor': platform.processor(), 'torch': torch.__version__,
                    'threads': torch.get_num_threads(),
                    'cuda_device': torch.cuda.get_device_name(device) if device.type == 'cuda' else None},
        'stats': stats, 'samples_ms': samples, 'targets': targets,
    }
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    return result


def print_table(stats: Dict[str, Dict[str, float]], targets: List[Dict[str, object]]) -> None:
    full = stats['F']['median_ms']
    print(f'\n| {"entry":<18} | {"median ms":>10} | {"min ms":>10} | {"max ms":>10} | {"/ F":>6} |')
    print(f'|{"-" * 20}|{"-" * 12}|{"-" * 12}|{"-" * 12}|{"-" * 8}|')
    for name, s in stats.items():
        print(f'| {name:<18} | {s["median_ms"]:>10.1f} | {s["min_ms"]:>10.1f} | {s["max_ms"]:>10.1f} '
              f'| {s["median_ms"] / full:>6.3f} |')
    floor = stats['qkv+proj only']['median_ms']
    core = (stats['L-squeeze']['median_ms'] - floor) / (full - floor)
    print(f'\n(info) without the shared qkv/proj cost: (L-squeeze - proj) / (F - proj) = {core:.3f} (1/{1 / core:.1f})')
    for t in targets:
        print(f'{"MET " if t["met"] else "MISS"}  {t["target"]}: {t["value"]}')


def run_distill_step(args: argparse.Namespace) -> dict:
    """One distillation training step (teacher forward, student forward + backward, AdamW) for a supernet with
    its path set to ``--arch`` vs a fixed-arch JetViT with that arch, interleaved."""
    import jetvit_mm.mm  # noqa: F401  (registers the types the distiller builds)
    from jetvit_mm.mm.distiller import FeatureDistiller

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    backbone = dict(model_name=args.model, window_size=args.window)
    depth = len(args.arch)
    students = {
        'supernet (L/W candidates)': dict(type='JetViTSupernet', search_space='LW', arch=args.arch, **backbone),
        f'fixed arch {args.arch}': dict(type='JetViT', arch=args.arch, **backbone),
    }
    distillers, optimizers = {}, {}
    for name, student in students.items():
        distillers[name] = FeatureDistiller(teacher=dict(type='JetViT', **backbone), student=student).train()
        if distillers[name].student.depth != depth:
            raise ValueError(f'--arch has {depth} letters, {args.model} has {distillers[name].student.depth} layers')
        optimizers[name] = torch.optim.AdamW([p for p in distillers[name].parameters() if p.requires_grad], lr=1e-5)
    x = torch.randn(args.batch, 3, *args.size)

    def step(name: str) -> None:
        model, optimizer = distillers[name], optimizers[name]
        if hasattr(model.student, 'set_arch'):
            model.student.set_arch(args.arch)  # what SupernetSamplerHook does before each iteration
        loss = model.loss(x)['loss_distill']
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    print(f'distill-step: {args.model}, input {args.size[0]}x{args.size[1]}, batch {args.batch}, arch {args.arch}, '
          f'{torch.get_num_threads()} threads', flush=True)
    started = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    samples = time_interleaved({name: (lambda n=name: step(n)) for name in distillers}, make_timer(torch.device('cpu')),
                               args.warmup, args.repeat)
    stats = summarize(samples)
    names = list(stats)
    ratio = stats[names[0]]['median_ms'] / stats[names[1]]['median_ms']
    for name, s in stats.items():
        print(f'| {name:<28} | median {s["median_ms"]:>9.1f} ms | min {s["min_ms"]:>9.1f} ms |')
    verdict = 'MET ' if ratio <= 1.25 else 'MISS'
    print(f'{verdict}  supernet step / fixed-arch step <= 1.25: x{ratio:.3f} (median)')
    result = {'command': 'distill-step', 'args': {k: v for k, v in vars(args).items() if k != 'func'},
              'date': started, 'stats': stats, 'samples_ms': samples, 'ratio_median': ratio}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    return result


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='command', required=True)
    mixers = sub.add_parser('mixers', help='per-mixer and per-block forward latency')
    mixers.add_argument('--grid', type=int, nargs=2, default=(64, 128), metavar=('H', 'W'), help='patch grid')
    mixers.add_argument('--dim', type=int, default=768)
    mixers.add_argument('--heads', type=int, default=12)
    mixers.add_argument('--batch', type=int, default=1)
    mixers.add_argument('--prefix', type=int, default=5, help='prefix tokens (DINOv3: cls + 4 registers)')
    mixers.add_argument('--window', type=int, default=16, help='window size of W')
    mixers.add_argument('--warmup', type=int, default=2)
    mixers.add_argument('--repeat', type=int, default=5)
    mixers.add_argument('--dtype', choices=sorted(DTYPES), default='fp32')
    mixers.add_argument('--device', choices=('cpu', 'cuda'), default='cpu')
    mixers.add_argument('--threads', type=int, default=0, help='torch threads on CPU (0: torch default)')
    mixers.add_argument('--no-rope', action='store_true', help='no RoPE (DINOv2-style teacher)')
    mixers.add_argument('--json', type=Path, default=None, help='also write all samples and stats here')
    mixers.set_defaults(func=run_mixers)

    step = sub.add_parser('distill-step', help='supernet vs fixed-arch distillation training step (CPU)')
    step.add_argument('--model', default='dinov3_vitb16')
    step.add_argument('--arch', default='LWLWLWLWLWLW', help='the path both students run (L/W letters)')
    step.add_argument('--size', type=int, nargs=2, default=(256, 512), metavar=('H', 'W'))
    step.add_argument('--batch', type=int, default=2)
    step.add_argument('--window', type=int, default=16)
    step.add_argument('--warmup', type=int, default=1)
    step.add_argument('--repeat', type=int, default=5)
    step.add_argument('--threads', type=int, default=0)
    step.add_argument('--json', type=Path, default=None)
    step.set_defaults(func=run_distill_step)
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> dict:
    args = parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    main()
