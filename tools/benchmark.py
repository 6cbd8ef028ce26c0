"""Benchmarks (not tests): one subcommand per thing measured.

    python tools/benchmark.py mixers [--grid 64 128] [--dim 768] [--heads 12] [--batch 1] [--prefix 5]
        [--window 16] [--warmup 2] [--repeat 5] [--dtype fp32|bf16] [--device cpu|cuda] [--threads N]
        [--no-rope] [--cuda-graph] [--malloc keep|system] [--json PATH]

`mixers` times every token mixer alone (F, W, L with each conv variant, plus the bare qkv/proj projections
every mixer contains) and whole pre-norm blocks (mixer + timm Mlp ratio 4 + LayerNorms) for L-static vs
L-squeeze. Measurements are interleaved: each repeat runs every entry once (rotating the start), so slow drifts
of a shared machine hit all entries alike. Reports median, min and max per entry and checks the targets of
docs/benchmarks.md.

    python tools/benchmark.py distill-step [--model dinov3_vitb16] [--arch LWLWLWLWLWLW] [--size 256 512]
        [--batch 2] [--warmup 1] [--repeat 5] [--malloc keep|system] [--json PATH]

`distill-step` times one distillation training step of a supernet (path set to --arch) against a fixed-arch
student with the same arch, interleaved (the supernet's overhead target: at most 1.25x).

    python tools/benchmark.py models [--model dinov3_vitb16] [--arch teacher|2F|all-L|all-W|ARCH ...]
        [--config CONFIG] [--checkpoint EXPORTED.pth] [--size H W ...] [--batch 1] [--dtype fp32|bf16|fp16]
        [--device cpu|cuda] [--warmup 1] [--repeat 5] [--compile] [--cuda-graph] [--throughput [BATCH]]
        [--linear-cfg KEY=VALUE ...] [--threads N] [--malloc keep|system] [--head none|dpt] [--no-teacher]
        [--no-memory] [--profile] [--json PATH] [--plot PNG]

`models` times whole JetViT forwards (random weights unless --checkpoint) for each arch at each --size, every
(size, arch) pair interleaved per repeat (so that both the speed-ups and the growth with size are measured side by
side), and reports latency (median, min, max), images/s, the peak memory of one forward (a fresh
process per arch and size: jetvit_mm/benchmark/memory.py), FLOPs with attention counted
(jetvit_mm/benchmark/flops.py) and the speed-up over the all-F teacher (always added unless --no-teacher).
Shortcuts: teacher = all F, all-L, all-W, 2F = a paper-style hybrid with two F layers (12 layers: LWLLWWLLWFLF).
``--head dpt`` times the depth model instead (JetViT-DepthAnything: the backbone's four tapped layers and
DepthAnythingV2's DPT head, as in the paper's Table 4), e.g. ``--model dinov2_vitl14 --head dpt --size 518 1022``
or ``--config configs/jetvit/depthanything_large_eval.py --head dpt``; its FLOPs are the part ``head``.

    python tools/benchmark.py plot RESULT.json --out PNG

`plot` draws the latency-vs-size plot of a saved `models` result (e.g. one measured on a GPU machine).

On CUDA, ``--cuda-graph`` captures each timed call in a CUDA graph and times its replay: at batch 1 a ViT-B
forward launches hundreds of small kernels, and eager timing then measures the host's launch rate as much as the
GPU. ``--linear-cfg precision=mixed`` (any L-mixer option) applies to every arch's L layers.

On CPU, ``--malloc keep`` (the default of every subcommand) makes glibc keep freed memory for the next call:
with the system policy every forward at 1024x2048 maps its big tensors afresh and page-faults ~1.2 million times,
which cost ~1 s of an 8 s forward and varied by VM state (jetvit_mm/benchmark/allocator.py). ``--malloc system``
measures the system policy. The peak-memory probes run in fresh processes with their own setting (memory.py).
"""
import argparse
import ast
import datetime
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import torch
from timm.layers import Mlp, RotaryEmbeddingDinoV3
from torch import nn

from jetvit_mm.benchmark.allocator import POLICIES as MALLOC_POLICIES
from jetvit_mm.benchmark.allocator import apply_policy
from jetvit_mm.benchmark.flops import count_flops
from jetvit_mm.benchmark.memory import DTYPES as MEMORY_DTYPES
from jetvit_mm.benchmark.memory import build_model, cuda_forward_memory, measure_forward_memory
from jetvit_mm.benchmark.timing import maybe_graphed, summarize, time_interleaved
from jetvit_mm.cli import check_inputs
from jetvit_mm.models.heads.dpt import dpt_preset
from jetvit_mm.models.mixers import build_mixer, validate_arch
from jetvit_mm.models.variants import get_variant

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
    if args.dtype != 'fp32':  # in fp32 the same computation as L-squeeze
        entries['L-squeeze mixed'] = build_mixer('L', **common, linear_cfg={'conv': 'squeeze', 'precision': 'mixed'})
    for conv in ('static', 'squeeze'):
        entries[f'block L-{conv}'] = Block(args.dim, build_mixer('L', **common, linear_cfg={'conv': conv}))
    return entries


def malloc_note(kept: bool, device: torch.device) -> str:
    """The allocator policy for the run's header line (CPU only: see jetvit_mm/benchmark/allocator.py)."""
    if device.type != 'cpu':
        return ''
    return ', malloc keeps freed memory' if kept else ', system malloc (freed blocks may be unmapped)'


def malloc_record(policy: str, kept: bool, device: torch.device) -> Dict[str, object]:
    return {'policy': policy, 'applied': kept, 'device': device.type}


def round_printer(rounds: int) -> Callable[[int, bool], None]:
    """The progress line after each interleaved round (``rounds`` = warmup + repeat)."""
    def on_round(done: int, warming_up: bool) -> None:
        print(f'  round {done}/{rounds}{" (warmup)" if warming_up else ""} done', flush=True)
    return on_round


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
    kept = apply_policy(args.malloc, device.type)
    torch.manual_seed(0)
    h, w = args.grid
    x = torch.randn(args.batch, args.prefix + h * w, args.dim, device=device, dtype=dtype)
    rope = None
    if not args.no_rope:
        rope = RotaryEmbeddingDinoV3(args.dim // args.heads, temperature=100).get_embed(shape=(h, w)).to(device)
    entries = {name: m.to(device=device, dtype=dtype).eval() for name, m in mixer_entries(args).items()}
    check_cuda_graph(args, device)
    print(f'mixers: grid {h}x{w} (+{args.prefix} prefix), dim {args.dim}, {args.heads} heads, batch {args.batch}, '
          f'{args.dtype} on {args.device}, {torch.get_num_threads()} threads, rope {rope is not None}'
          f'{", CUDA graphs" if args.cuda_graph else ""}{malloc_note(kept, device)}', flush=True)
    started = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    with torch.inference_mode():
        calls = maybe_graphed({name: (lambda m=m: m(x, (h, w), rope)) for name, m in entries.items()},
                              args.cuda_graph)
        samples = time_interleaved(calls, args.warmup, args.repeat, device,
                                   on_round=round_printer(args.warmup + args.repeat))
    stats = summarize(samples)
    targets = check_targets(stats)
    print_table(stats, targets)
    result = {
        'command': 'mixers', 'args': {k: v for k, v in vars(args).items() if k != 'func'},
        'date': started,
        'machine': {'platform': platform.platform(), 'processor': platform.processor(), 'torch': torch.__version__,
                    'threads': torch.get_num_threads(),
                    'cuda_device': torch.cuda.get_device_name(device) if device.type == 'cuda' else None},
        'malloc': malloc_record(args.malloc, kept, device), 'stats': stats, 'samples_ms': samples, 'targets': targets,
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
    kept = apply_policy(args.malloc, 'cpu')
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
          f'{torch.get_num_threads()} threads{malloc_note(kept, torch.device("cpu"))}', flush=True)
    started = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    samples = time_interleaved({name: (lambda n=name: step(n)) for name in distillers}, args.warmup, args.repeat,
                               'cpu', on_round=round_printer(args.warmup + args.repeat))
    stats = summarize(samples)
    names = list(stats)
    ratio = stats[names[0]]['median_ms'] / stats[names[1]]['median_ms']
    for name, s in stats.items():
        print(f'| {name:<28} | median {s["median_ms"]:>9.1f} ms | min {s["min_ms"]:>9.1f} ms |')
    verdict = 'MET ' if ratio <= 1.25 else 'MISS'
    print(f'{verdict}  supernet step / fixed-arch step <= 1.25: x{ratio:.3f} (median)')
    result = {'command': 'distill-step', 'args': {k: v for k, v in vars(args).items() if k != 'func'},
              'date': started, 'malloc': malloc_record(args.malloc, kept, torch.device('cpu')), 'stats': stats,
              'samples_ms': samples, 'ratio_median': ratio}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    return result


# ----------------------------------------------------------------------------- models: whole-model benchmark

# The 2-F shortcut: METHOD.md's 12-layer example (F at layers 9 and 11, the last layers, where the paper's search put
# DINOv3's full attention for a linear-probe head); other depths: F at the paper's DINOv3-L layers scaled to depth.
TWO_FULL_ARCHS = {12: 'LWLLWWLLWFLF'}
ARCH_SHORTCUTS = ('teacher', '2F', 'all-L', 'all-W')
DEFAULT_ARCHS = ('teacher', '2F', 'all-L')
MODEL_DTYPES = ('fp32', 'bf16', 'fp16')
SUPERNET_ONLY_KEYS = ('search_space', 'step1_arch', 'freeze_mlp')
NOT_BUILD_KEYS = ('type', 'init_cfg', 'checkpoint', 'frozen')
MIB = 2 ** 20
MEMORY_MARGIN = 0.01  # a memory target counts as met only below the reference by more than this fraction


def two_full_arch(depth: int) -> str:
    """A paper-style hybrid with 2 F layers near the end, the rest alternating L/W."""
    if depth in TWO_FULL_ARCHS:
        return TWO_FULL_ARCHS[depth]
    letters = ['LWLLWW'[i % 6] for i in range(depth)]
    for i in (depth * 14 // 24, depth * 22 // 24):
        letters[i] = 'F'
    return ''.join(letters)


def resolve_arch(name: str, depth: int) -> str:
    """An arch string from a shortcut (teacher, 2F, all-L, all-W) or an arch string itself (validated)."""
    shortcuts = {'teacher': 'F' * depth, '2F': two_full_arch(depth), 'all-L': 'L' * depth, 'all-W': 'W' * depth}
    if name in shortcuts:
        return shortcuts[name]
    try:
        return validate_arch(name, depth)
    except ValueError as e:
        raise ValueError(f'{e} (or a shortcut: {", ".join(ARCH_SHORTCUTS)})') from None


def backbone_from_config(path: str) -> dict:
    """JetViT keyword arguments of a config's ``model.backbone`` (or a distiller's ``model.student``)."""
    from mmengine.config import Config

    model = Config.fromfile(path).model
    backbone = model.get('backbone') or model.get('student')
    if backbone is None:
        raise ValueError(f'{path}: model has neither a backbone nor a student to benchmark')
    backbone = backbone.to_dict() if hasattr(backbone, 'to_dict') else dict(backbone)
    kind = str(backbone.get('type', 'JetViT')).split('.')[-1]
    if kind not in ('JetViT', 'JetViTSupernet'):
        raise ValueError(f'{path}: backbone type {kind!r} is not a JetViT (or JetViTSupernet)')
    return {k: v for k, v in backbone.items() if k not in NOT_BUILD_KEYS + SUPERNET_ONLY_KEYS}


def head_from_args(args: argparse.Namespace, model_name: str) -> Optional[Dict[str, object]]:
    """``--head dpt``: the DPT widths (``features``, ``out_channels``) of ``--config``'s ``DPTDepthHead`` (its own
    widths, else its preset) or else of the model's preset; None without a head."""
    if args.head == 'none':
        return None
    head = None
    if args.config:
        from mmengine.config import Config

        head = Config.fromfile(args.config).model.get('decode_head')
        if head is not None and str(head.get('type', '')).split('.')[-1] != 'DPTDepthHead':
            raise ValueError(f'--head dpt: {args.config} has a {head.get("type")} decode head, not a DPTDepthHead')
    features = head.get('features') if head else None
    out_channels = head.get('out_channels') if head else None
    if features is None or out_channels is None:  # as DPTDepthHead: a preset only for what is not given
        preset = dpt_preset(head.get('preset') or model_name if head else model_name)
        features = preset.features if features is None else features
        out_channels = preset.out_channels if out_channels is None else out_channels
    return {'features': int(features), 'out_channels': [int(c) for c in out_channels]}


def backbone_of(model: nn.Module) -> nn.Module:
    """The JetViT of a benchmarked model (itself, or a depth model's backbone)."""
    return getattr(model, 'backbone', model)


def model_entries(args: argparse.Namespace) -> List[Dict[str, object]]:
    """What `models` measures: one dict per arch with its label, arch string, JetViT keyword arguments and head
    (None, or the DPT widths with ``--head dpt``)."""
    base = backbone_from_config(args.config) if args.config else {}
    config_arch = base.pop('arch', None)
    base.setdefault('model_name', args.model)
    if args.window is not None:
        base['window_size'] = args.window
    for option in args.linear_cfg or ():
        base['linear_cfg'] = {**(base.get('linear_cfg') or {}), **option}
    depth = get_variant(base['model_name']).depth if base.get('depth') is None else int(base['depth'])
    head = head_from_args(args, base['model_name'])
    names = args.arch or ([config_arch or 'teacher'] if args.config else list(DEFAULT_ARCHS))
    if args.checkpoint and len([n for n in names if resolve_arch(n, depth) != 'F' * depth]) != 1:
        raise ValueError('--checkpoint needs exactly one non-teacher --arch: the exported hybrid\'s arch')
    entries = []
    for name in names:
        arch = resolve_arch(name, depth)
        kwargs = dict(base, arch=arch)
        if args.checkpoint and arch != 'F' * depth:
            kwargs['checkpoint'] = str(args.checkpoint)
        label = name if name in ARCH_SHORTCUTS else arch
        if label in [e['label'] for e in entries]:
            continue
        entries.append({'label': label, 'arch': arch, 'kwargs': kwargs, 'head': head})
    if not args.no_teacher and 'F' * depth not in [e['arch'] for e in entries]:
        entries.insert(0, {'label': 'teacher', 'arch': 'F' * depth, 'kwargs': dict(base, arch='F' * depth),
                           'head': head})
    return entries


def _mixer_counts(arch: str) -> str:
    return ' '.join(f'{arch.count(letter)}{letter}' for letter in 'FWL' if arch.count(letter))


def largest_cuda_batch(model: nn.Module, size: Tuple[int, int], dtype: torch.dtype, device: torch.device,
                       cap: int = 1024) -> int:
    """The largest power-of-two batch whose forward fits in GPU memory (at most ``cap``)."""
    fits, batch = 0, 1
    while batch <= cap:
        try:
            with torch.inference_mode():
                model(torch.randn(batch, 3, *size, device=device, dtype=dtype))
            torch.cuda.synchronize(device)
            fits, batch = batch, batch * 2
        except torch.cuda.OutOfMemoryError:
            break
        finally:
            torch.cuda.empty_cache()
    if not fits:
        raise RuntimeError(f'not even batch 1 fits at {size[0]}x{size[1]}')
    return fits


def block_times(model: nn.Module, x: torch.Tensor, device: torch.device) -> List[float]:
    """Milliseconds of each block in one forward (forward hooks; synchronised on CUDA)."""
    times: List[float] = []
    starts: Dict[int, float] = {}

    def now() -> float:
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        return time.perf_counter()

    def pre(module: nn.Module, args: tuple) -> None:
        starts[id(module)] = now()

    def post(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        times.append((now() - starts[id(module)]) * 1e3)

    handles = [h for b in backbone_of(model).blocks
               for h in (b.register_forward_pre_hook(pre), b.register_forward_hook(post))]
    try:
        with torch.inference_mode():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return times


def profile_model(model: nn.Module, x: torch.Tensor, device: torch.device, top: int = 12) -> List[Dict[str, object]]:
    """Top ops by self time of one forward under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == 'cuda' else [])
    with torch.inference_mode(), profile(activities=activities) as prof:
        model(x)
    attr = 'self_device_time_total' if device.type == 'cuda' else 'self_cpu_time_total'
    events = sorted(prof.key_averages(), key=lambda e: getattr(e, attr), reverse=True)
    total = sum(getattr(e, attr) for e in events)
    return [{'op': e.key, 'self_ms': getattr(e, attr) / 1e3, 'share': getattr(e, attr) / total, 'calls': e.count}
            for e in events[:top]]


QUIET_CORES = 0.25  # a sample is "quiet" when other processes used less CPU than this while it ran


class CpuContention:
    """CPU time other processes used while a call ran, in cores (Linux /proc; None elsewhere).

    The machine this runs on may be shared: a 2-thread forward slows down ~2x when other jobs take the cores. Each
    sample records ``(busy CPU of the whole machine - this process's CPU) / wall time``, so every figure says how
    contended it was. Calls shorter than 20 clock ticks (0.2 s) get None: tick accounting cannot tell.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.available = enabled and Path('/proc/stat').is_file() and Path('/proc/self/stat').is_file()
        self.hz = os.sysconf('SC_CLK_TCK') if self.available else 100

    def snapshot(self) -> Optional[Tuple[float, int, int]]:
        if not self.available:
            return None
        with open('/proc/stat') as f:
            user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in f.readline().split()[1:8])
        with open('/proc/self/stat') as f:
            own = f.read().rsplit(')', 1)[1].split()
        return time.perf_counter(), user + nice + system + irq + softirq, int(own[11]) + int(own[12])

    def others_cores(self, before: Optional[tuple], after: Optional[tuple]) -> Optional[float]:
        if before is None or after is None or after[0] - before[0] < 20 / self.hz:
            return None  # unknown, or too short for the kernel's tick-based CPU accounting
        busy, own = after[1] - before[1], after[2] - before[2]
        return max(0., (busy - own) / self.hz / (after[0] - before[0]))


def quiet_stats(samples: List[float], others: List[Optional[float]]) -> Dict[str, object]:
    """Median/min over the samples taken while other processes used < QUIET_CORES of CPU."""
    quiet = [ms for ms, o in zip(samples, others) if o is not None and o < QUIET_CORES]
    known = [o for o in others if o is not None]
    return {'others_cores': others, 'others_cores_mean': statistics.mean(known) if known else None,
            'quiet_samples': len(quiet), 'quiet_median_ms': statistics.median(quiet) if quiet else None,
            'quiet_min_ms': min(quiet) if quiet else None}


def run_models(args: argparse.Namespace) -> dict:
    """Whole-model forward latency, throughput, peak memory and FLOPs per arch and input size, archs interleaved."""
    if args.threads:
        torch.set_num_threads(args.threads)
    device, dtype = torch.device(args.device), MEMORY_DTYPES[args.dtype]
    check_cuda_graph(args, device)
    kept = apply_policy(args.malloc, device.type)  # the memory probes' fresh processes set their own
    entries = model_entries(args)
    models: Dict[str, nn.Module] = {}
    for e in entries:
        torch.manual_seed(0)  # the same random weights wherever two archs share them
        models[e['label']] = build_model(e['kwargs'], e['head']).to(device=device, dtype=dtype).eval()
    patch = backbone_of(models[entries[0]['label']]).patch_size  # default sizes: 512x1024 and 1024x2048 at patch 16
    sizes = [tuple(s) for s in (args.size or [(32 * patch, 64 * patch), (64 * patch, 128 * patch)])]
    started = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    load_start = os.getloadavg()
    print(f'models: {", ".join(e["label"] + " " + e["arch"] for e in entries)}'
          f'{" + DPT head " + str(entries[0]["head"]) if entries[0]["head"] else ""}; sizes '
          f'{", ".join(f"{h}x{w}" for h, w in sizes)}; batch {args.batch}, {args.dtype} on {args.device}, '
          f'{torch.get_num_threads()} threads, load average {load_start[0]:.2f}'
          f'{", CUDA graphs" if args.cuda_graph else ""}{malloc_note(kept, device)}', flush=True)
    runners = {label: (torch.compile(m) if args.compile else m) for label, m in models.items()}
    probe = CpuContention(enabled=device.type == 'cpu')  # on CUDA it would read /proc inside the event window

    # every (size, arch) pair in one round-robin: the growth from one size to the next is then measured side by
    # side as well, not minutes apart
    print(f'\nlatency at batch {args.batch}, sizes and archs interleaved', flush=True)
    calls: Dict[str, Callable[[], torch.Tensor]] = {}
    with torch.inference_mode():
        for h, w in sizes:
            x = torch.randn(args.batch, 3, h, w, device=device, dtype=dtype)
            calls.update(maybe_graphed({f'{h}x{w} {label}': (lambda m=m, x=x: m(x)) for label, m in runners.items()},
                                       args.cuda_graph))
    others: Dict[str, List[Optional[float]]] = {name: [] for name in calls}

    def run(name: str) -> torch.Tensor:
        before = probe.snapshot()
        out = calls[name]()
        others[name].append(probe.others_cores(before, probe.snapshot()))
        return out

    with torch.inference_mode():
        pair_samples = time_interleaved({name: (lambda name=name: run(name)) for name in calls}, args.warmup,
                                        args.repeat, device, on_round=round_printer(args.warmup + args.repeat))
    calls.clear()  # frees the inputs (and CUDA graphs) before the throughput runs

    rows: List[Dict[str, object]] = []
    samples: Dict[str, Dict[str, List[float]]] = {}
    for h, w in sizes:
        key = f'{h}x{w}'
        samples[key] = {label: pair_samples[f'{key} {label}'] for label in runners}
        stats = summarize(samples[key])
        for label in stats:
            stats[label].update(quiet_stats(samples[key][label], others[f'{key} {label}'][args.warmup:]))
        throughput = {label: (args.batch, args.batch * 1e3 / s['median_ms']) for label, s in stats.items()}
        if args.throughput is not None and (args.throughput > 0 or device.type == 'cuda'):
            batches = {label: (args.throughput if args.throughput > 0 else largest_cuda_batch(m, (h, w), dtype, device))
                       for label, m in runners.items()}
            if any(b != args.batch for b in batches.values()):
                print(f'{key}: throughput at batch {batches}', flush=True)
                inputs = {b: torch.randn(b, 3, h, w, device=device, dtype=dtype) for b in set(batches.values())}
                with torch.inference_mode():
                    tp_calls = maybe_graphed({label: (lambda m=m, xb=inputs[batches[label]]: m(xb))
                                              for label, m in runners.items()}, args.cuda_graph)
                    tp = summarize(time_interleaved(tp_calls, args.warmup, args.repeat, device,
                                                    on_round=round_printer(args.warmup + args.repeat)))
                del tp_calls, inputs
                throughput = {label: (batches[label], batches[label] * 1e3 / tp[label]['median_ms'])
                              for label in runners}
        for e in entries:
            label = e['label']
            flops = count_flops(models[label], (h, w))
            patch = backbone_of(models[label]).patch_size
            rows.append({'size': key, 'tokens': (h // patch) * (w // patch), 'patch_size': patch,
                         'label': label, 'arch': e['arch'], 'gflops': flops['gflops'],
                         'gflops_by_part': {k: v / 1e9 for k, v in flops['by_part'].items()},
                         **stats[label], 'throughput_batch': throughput[label][0],
                         'images_per_s': throughput[label][1]})
    teacher = 'F' * backbone_of(models[entries[0]['label']]).depth
    for row in rows:
        ref = next((r for r in rows if r['size'] == row['size'] and r['arch'] == teacher), None)
        row['speedup'] = ref['median_ms'] / row['median_ms'] if ref else None
        row['speedup_min'] = ref['min_ms'] / row['min_ms'] if ref else None
        quiet = ref and ref.get('quiet_median_ms') and row.get('quiet_median_ms')
        row['speedup_quiet'] = ref['quiet_median_ms'] / row['quiet_median_ms'] if quiet else None

    if not args.no_memory:
        print('\npeak memory: ' + ('torch.cuda.max_memory_allocated per arch and size' if device.type == 'cuda'
                                    else 'one fresh process per arch and size'), flush=True)
        for row in rows:
            e = next(e for e in entries if e['label'] == row['label'])
            h, w = (int(v) for v in str(row['size']).split('x'))
            if device.type == 'cuda':  # exact in this process: the allocator counts live tensors only
                x = torch.randn(args.batch, 3, h, w, device=device, dtype=dtype)
                mem = cuda_forward_memory(models[row['label']], x)
                del x
            else:  # RSS needs a fresh process per (arch, size)
                mem = measure_forward_memory(e['kwargs'], (args.batch, 3, h, w), args.dtype, args.device,
                                             args.threads, head=e['head'])
            row['memory'] = mem
            row['peak_increase_mib'] = mem['peak_increase_bytes'] / MIB
            print(f'  {row["size"]} {row["label"]}: +{row["peak_increase_mib"]:.0f} MiB ({mem["method"]})', flush=True)

    profiles = {}
    if args.profile:
        h, w = max(sizes, key=lambda size: size[0] * size[1])
        x = torch.randn(1, 3, h, w, device=device, dtype=dtype)
        print(f'\nprofile at {h}x{w}, batch 1 (block times, then torch.profiler top ops)', flush=True)
        for e in entries:
            model = models[e['label']]
            times = block_times(model, x, device)
            per_letter = {letter: statistics.mean(t for t, a in zip(times, e['arch']) if a == letter)
                          for letter in sorted(set(e['arch']))}
            profiles[e['label']] = {'block_ms': times, 'mean_block_ms_by_mixer': per_letter,
                                    'top_ops': profile_model(model, x, device)}
    load_end = os.getloadavg()
    targets = check_model_targets(rows)
    print_models_table(rows, targets, profiles)
    print(f'\nload average: {load_start[0]:.2f} at start, {load_end[0]:.2f} at end', flush=True)
    result = {
        'command': 'models', 'args': {k: v for k, v in vars(args).items() if k != 'func'}, 'date': started,
        'machine': {'platform': platform.platform(), 'processor': platform.processor(), 'torch': torch.__version__,
                    'threads': torch.get_num_threads(), 'cpu_count': os.cpu_count(),
                    'cuda_device': torch.cuda.get_device_name(device) if device.type == 'cuda' else None},
        'load_average': {'start': load_start, 'end': load_end}, 'malloc': malloc_record(args.malloc, kept, device),
        'entries': [{k: e[k] for k in ('label', 'arch', 'kwargs', 'head')} for e in entries],
        'rows': rows, 'samples_ms': samples, 'targets': targets, 'profiles': profiles,
    }
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    if args.plot:
        head = ' + DPT head' if entries[0]['head'] else ''
        plot_scaling(rows, args.plot, f'{entries[0]["kwargs"]["model_name"]}{head}, {args.dtype}, batch {args.batch}, '
                                      f'{args.device} ({torch.get_num_threads()} threads{malloc_note(kept, device)})')
    return result


def _row(rows: List[Dict[str, object]], size: str, label: str) -> Optional[Dict[str, object]]:
    return next((r for r in rows if r['size'] == size and r['label'] == label), None)


def _quiet_note(value: Optional[float]) -> str:
    return f', x{value:.2f} (median of quiet samples)' if value else ''


def check_model_targets(rows: List[Dict[str, object]]) -> List[Dict[str, object]]:
    """docs/benchmarks.md's whole-model targets (verdicts on medians), for those whose entries were measured."""
    targets = []
    for label, goal in (('2F', 1.9), ('all-L', 2.5)):
        r = _row(rows, '1024x2048', label)
        if r and r['speedup']:
            targets.append({'target': f'{label} >= {goal}x faster than the teacher at 1024x2048',
                            'value': f'x{r["speedup"]:.2f} (median), x{r["speedup_min"]:.2f} (min)'
                                     + _quiet_note(r.get('speedup_quiet')),
                            'met': r['speedup'] >= goal})
    small, large = '512x1024', '1024x2048'
    for label, check in (('all-L', lambda g: g <= 4.5), ('teacher', lambda g: g > 4.0)):
        a, b = _row(rows, small, label), _row(rows, large, label)
        if a and b:
            growth = b['median_ms'] / a['median_ms']
            rule = 'at most 4.5x' if label == 'all-L' else 'super-linear (> 4x)'
            quiet = (b['quiet_median_ms'] / a['quiet_median_ms']
                     if a.get('quiet_median_ms') and b.get('quiet_median_ms') else None)
            targets.append({'target': f'{label} latency growth {small} -> {large} (4x tokens) {rule}',
                            'value': f'x{growth:.2f} (median), x{b["min_ms"] / a["min_ms"]:.2f} (min)'
                                     + _quiet_note(quiet),
                            'met': check(growth)})
    t, hyb = _row(rows, large, 'teacher'), _row(rows, large, '2F')
    if t and hyb and 'memory' in t and 'memory' in hyb:
        change = hyb['peak_increase_mib'] / t['peak_increase_mib'] - 1
        targets.append({'target': f'2F peak forward memory below the teacher\'s at {large} (by more than '
                                  f'{MEMORY_MARGIN:.0%}: page-level noise is not a saving)',
                        'value': f'{hyb["peak_increase_mib"]:.1f} MiB vs {t["peak_increase_mib"]:.1f} MiB '
                                 f'({change:+.2%})',
                        'met': change < -MEMORY_MARGIN})
    return targets


def print_models_table(rows: List[Dict[str, object]], targets: List[Dict[str, object]], profiles: dict) -> None:
    def fmt(value: Optional[float], spec: str, prefix: str = '') -> str:
        return '-' if value is None else prefix + format(value, spec)

    columns = [('size', 9), ('arch', 22), ('mixers', 9), ('GFLOPs', 7), ('median ms', 9), ('min ms', 9),
               ('max ms', 9), ('img/s', 7), ('peak MiB', 8), ('speed-up', 8), ('others CPU', 10), ('quiet', 5),
               ('quiet med ms', 12), ('quiet speed-up', 14)]
    print('\n| ' + ' | '.join(f'{name:>{width}}' for name, width in columns) + ' |')
    print('|' + '|'.join('-' * (width + 2) for _, width in columns) + '|')
    for r in rows:
        name = r['label'] if r['label'] == r['arch'] else f'{r["label"]} {r["arch"]}'
        cells = [r['size'], name, _mixer_counts(str(r['arch'])), f'{r["gflops"]:.1f}', f'{r["median_ms"]:.1f}',
                 f'{r["min_ms"]:.1f}', f'{r["max_ms"]:.1f}', f'{r["images_per_s"]:.3f}',
                 fmt(r.get('peak_increase_mib'), '.0f'), fmt(r['speedup'], '.2f', 'x'),
                 fmt(r.get('others_cores_mean'), '.2f'), f'{r.get("quiet_samples", 0)}/{len(r["others_cores"])}',
                 fmt(r.get('quiet_median_ms'), '.1f'), fmt(r.get('speedup_quiet'), '.2f', 'x')]
        print('| ' + ' | '.join(f'{str(c):>{width}}' for c, (_, width) in zip(cells, columns)) + ' |')
    print(f'(others CPU: mean cores other processes used while a sample ran; quiet: samples with < {QUIET_CORES})')
    for label, p in profiles.items():
        blocks = ', '.join(f'{k} {v:.0f} ms' for k, v in p['mean_block_ms_by_mixer'].items())
        print(f'\n{label}: mean block time by mixer: {blocks}; top ops by self time:')
        for op in p['top_ops']:
            print(f'  {op["op"]:<48} {op["self_ms"]:>9.1f} ms {op["share"] * 100:>5.1f}% {op["calls"]:>5} calls')
    for t in targets:
        print(f'{"MET " if t["met"] else "MISS"}  {t["target"]}: {t["value"]}')


def plot_scaling(rows: List[Dict[str, object]], path: Path, title: str) -> None:
    """Median latency (min-max bars) vs patch tokens per arch, log-log, with a linear-in-tokens guide."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    fig, ax = plt.subplots(figsize=(5.5, 3.8), dpi=100)
    labels = list(dict.fromkeys(r['label'] for r in rows))
    for label in labels:
        rs = sorted((r for r in rows if r['label'] == label), key=lambda r: r['tokens'])
        xs = [r['tokens'] for r in rs]
        ys = [r['median_ms'] / 1e3 for r in rs]
        err = [[(r['median_ms'] - r['min_ms']) / 1e3 for r in rs], [(r['max_ms'] - r['median_ms']) / 1e3 for r in rs]]
        name = label if label == rs[0]['arch'] else f'{label} ({rs[0]["arch"]})'
        ax.errorbar(xs, ys, yerr=err, marker='o', capsize=3, label=name)
    fastest = min((r for r in rows), key=lambda r: (r['tokens'], r['median_ms']))
    xs = sorted({r['tokens'] for r in rows})
    ax.plot(xs, [fastest['median_ms'] / 1e3 * t / xs[0] for t in xs], 'k:', lw=1, label='linear in tokens')
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.set_xticks(xs)
    ax.set_xticklabels([next(r['size'] for r in rows if r['tokens'] == t) for t in xs])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f'{v:g}'))
    ax.yaxis.set_minor_locator(NullLocator())
    patch = rows[0].get('patch_size', 16)  # results from before patch_size was recorded are all patch 16
    ax.set_xlabel(f'input size (patch tokens: {patch}x{patch} px each)')
    ax.set_ylabel('forward latency, s (median, min-max)')
    ax.set_title(title, fontsize=9)
    ax.grid(True, which='major', alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def run_plot(args: argparse.Namespace) -> dict:
    """Draw the scaling plot of a saved `models --json` result (e.g. one measured on another machine)."""
    result = json.loads(Path(args.result).read_text())
    if result.get('command') != 'models':
        raise SystemExit(f'{args.result} is not a `models` result (command={result.get("command")!r})')
    a, machine = result['args'], result.get('machine', {})
    malloc = result.get('malloc')  # absent in results from before the allocator option
    where = machine.get('cuda_device') or (f'{a["device"]} ({machine.get("threads")} threads'
                                           f'{malloc_note(malloc["applied"], torch.device("cpu")) if malloc else ""})')
    graph = ', CUDA graphs' if a.get('cuda_graph') else ''
    linear = ''.join(f', L {k}={v}' for k, v in (result['entries'][-1]['kwargs'].get('linear_cfg') or {}).items())
    head = ' + DPT head' if result['entries'][0].get('head') else ''
    plot_scaling(result['rows'], args.out, f'{result["entries"][0]["kwargs"]["model_name"]}{head}, {a["dtype"]}'
                                           f'{linear}, batch {a["batch"]}, {where}{graph}')
    print(f'wrote {args.out}')
    return result


def key_value(text: str) -> Dict[str, object]:
    """``KEY=VALUE`` -> ``{KEY: VALUE}``; VALUE a Python literal where it is one (3, 0.5, None), else a string."""
    key, sep, value = text.partition('=')
    if not sep or not key:
        raise argparse.ArgumentTypeError(f'expected KEY=VALUE, got {text!r}')
    try:
        return {key: ast.literal_eval(value)}
    except (ValueError, SyntaxError):
        return {key: value}


def check_cuda_graph(args: argparse.Namespace, device: torch.device) -> None:
    if args.cuda_graph and device.type != 'cuda':
        raise SystemExit('--cuda-graph needs --device cuda')
    if args.cuda_graph and getattr(args, 'compile', False):
        raise SystemExit('--cuda-graph and --compile: pick one (torch.compile(mode="reduce-overhead") graphs itself)')


def count(minimum: int) -> Callable[[str], int]:
    """argparse type: an int >= ``minimum``."""
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f'must be >= {minimum}, got {value}')
        return value
    parse.__name__ = f'int >= {minimum}'
    return parse


MALLOC_HELP = ('CPU: keep freed memory in the heap for the next call (default: no page faults from mapping big tensors '
               'again every call) or leave the system allocator policy')


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
    mixers.add_argument('--warmup', type=count(0), default=2)
    mixers.add_argument('--repeat', type=count(1), default=5)
    mixers.add_argument('--dtype', choices=sorted(DTYPES), default='fp32')
    mixers.add_argument('--device', choices=('cpu', 'cuda'), default='cpu')
    mixers.add_argument('--threads', type=int, default=0, help='torch threads on CPU (0: torch default)')
    mixers.add_argument('--malloc', choices=MALLOC_POLICIES, default='keep', help=MALLOC_HELP)
    mixers.add_argument('--no-rope', action='store_true', help='no RoPE (DINOv2-style teacher)')
    mixers.add_argument('--cuda-graph', action='store_true', help='time CUDA-graph replays (CUDA only)')
    mixers.add_argument('--json', type=Path, default=None, help='also write all samples and stats here')
    mixers.set_defaults(func=run_mixers)

    step = sub.add_parser('distill-step', help='supernet vs fixed-arch distillation training step (CPU)')
    step.add_argument('--model', default='dinov3_vitb16')
    step.add_argument('--arch', default='LWLWLWLWLWLW', help='the path both students run (L/W letters)')
    step.add_argument('--size', type=int, nargs=2, default=(256, 512), metavar=('H', 'W'))
    step.add_argument('--batch', type=int, default=2)
    step.add_argument('--window', type=int, default=16)
    step.add_argument('--warmup', type=count(0), default=1)
    step.add_argument('--repeat', type=count(1), default=5)
    step.add_argument('--threads', type=int, default=0)
    step.add_argument('--malloc', choices=MALLOC_POLICIES, default='keep', help=MALLOC_HELP)
    step.add_argument('--json', type=Path, default=None)
    step.set_defaults(func=run_distill_step)

    models = sub.add_parser('models', help='whole-model latency, throughput, memory, FLOPs per arch and size')
    models.add_argument('--model', default='dinov3_vitb16', help='teacher variant (ignored with --config)')
    models.add_argument('--arch', action='append', default=None,
                        help=f'arch string or shortcut ({", ".join(ARCH_SHORTCUTS)}), repeatable; '
                             f'default: {" ".join(DEFAULT_ARCHS)} (the config\'s arch with --config)')
    models.add_argument('--config', default=None, help='take the JetViT arguments from this config\'s model.backbone')
    models.add_argument('--checkpoint', type=Path, default=None,
                        help='exported JetViT checkpoint for the one non-teacher --arch (otherwise random weights); '
                             'with --head dpt an export with its head (hybrid_<arch>_with_head.pth)')
    models.add_argument('--window', type=int, default=None, help='window size of W (default: model / config)')
    models.add_argument('--size', type=int, nargs=2, action='append', default=None, metavar=('H', 'W'),
                        help='input size in pixels, repeatable (default: 32 x 64 and 64 x 128 patches: 512 1024 and '
                             '1024 2048 at patch 16, 448 896 and 896 1792 at patch 14)')
    models.add_argument('--batch', type=int, default=1, help='batch of the latency run')
    models.add_argument('--dtype', choices=MODEL_DTYPES, default='fp32')
    models.add_argument('--device', choices=('cpu', 'cuda'), default='cpu')
    models.add_argument('--warmup', type=count(0), default=1)
    models.add_argument('--repeat', type=count(1), default=5)
    models.add_argument('--compile', action='store_true', help='time torch.compile(model) (memory probe: eager)')
    models.add_argument('--cuda-graph', action='store_true', help='time CUDA-graph replays (CUDA only)')
    models.add_argument('--linear-cfg', type=key_value, action='append', default=None, metavar='KEY=VALUE',
                        help='an L-mixer option for every arch, e.g. precision=mixed, conv=static, kernel_size=5')
    models.add_argument('--throughput', type=int, nargs='?', const=-1, default=None, metavar='BATCH',
                        help='also time this batch for images/s; without a value: the largest power-of-two batch '
                             'that fits (CUDA) or --batch (CPU). Default: images/s of the latency run')
    models.add_argument('--threads', type=int, default=0, help='torch threads on CPU (0: torch default)')
    models.add_argument('--malloc', choices=MALLOC_POLICIES, default='keep', help=MALLOC_HELP)
    models.add_argument('--head', choices=('none', 'dpt'), default='none',
                        help='dpt: time the depth model of the paper\'s Table 4, the backbone (a DINOv2 model) and '
                             'DepthAnythingV2\'s DPT head (widths from --config\'s decode_head, else the model\'s '
                             'preset); sizes must be multiples of 14')
    models.add_argument('--no-teacher', action='store_true', help='do not add the all-F teacher as reference')
    models.add_argument('--no-memory', action='store_true', help='skip the peak-memory processes')
    models.add_argument('--profile', action='store_true',
                        help='at the largest size: per-block times and torch.profiler top ops per arch')
    models.add_argument('--json', type=Path, default=None)
    models.add_argument('--plot', type=Path, default=None, help='PNG of latency vs input size per arch')
    models.set_defaults(func=run_models)

    plot = sub.add_parser('plot', help='scaling plot (PNG) of a saved `models --json` result')
    plot.add_argument('result', type=Path)
    plot.add_argument('--out', type=Path, required=True)
    plot.set_defaults(func=run_plot)
    args = parser.parse_args(argv)
    check_inputs(parser, args, ('config', 'checkpoint', 'result'))
    return args


def main(argv: Optional[List[str]] = None) -> dict:
    args = parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    main()
