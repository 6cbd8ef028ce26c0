"""Benchmarks (not tests): one subcommand per thing measured, side by side in one interleaved run; each prints its
table and the documented targets (MET / MISS) and ``--json`` writes the result with the machine it ran on.

    python tools/benchmark.py mixers           the token mixers alone and in blocks (torch paths and fast paths)
    python tools/benchmark.py distill-step     a supernet's distillation step against a fixed-arch student's
    python tools/benchmark.py distill-kernels  a distillation step on the fast mixer paths against the torch paths
    python tools/benchmark.py models           whole models per arch and input size: latency, memory, FLOPs, speed-up
    python tools/benchmark.py plan             the memory planner: per-GPU memory of a distillation step
    python tools/benchmark.py plot             the latency-vs-size plot of a saved `models` result

``tools/benchmark.py SUBCOMMAND --help`` says what each measures and takes; how they measure, and every figure with
its command: docs/benchmarks.md.

On CPU, ``--malloc keep`` (the default of every subcommand) makes glibc keep freed memory for the next call:
with the system policy every forward at 1024x2048 maps its big tensors afresh and page-faults ~1.2 million times,
which cost ~1 s of an 8 s forward and varied by VM state (jetvit_mm/benchmark/allocator.py). ``--malloc system``
measures the system policy. The peak-memory probes run in fresh processes with their own setting (memory.py).
"""
import argparse
import ast
import json
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import torch

from jetvit_mm.benchmark.allocator import POLICIES as MALLOC_POLICIES
from jetvit_mm.benchmark.archs import ARCH_SHORTCUTS, DISTILL_KERNEL_ARCHS
from jetvit_mm.benchmark.distill import build_distiller, distill_step
from jetvit_mm.benchmark.host import machine_record, malloc_note, malloc_record, prepare_host, started_at
from jetvit_mm.benchmark.mixers import DTYPE_CHOICES as MIXER_DTYPES
from jetvit_mm.benchmark.mixers import FAST_KERNELS, benchmark_mixers
from jetvit_mm.benchmark.models import (
    DEFAULT_ARCHS,
    baseline_entries,
    benchmark_models,
    dpt_widths,
    jetvit_kwargs,
    model_entries,
)
from jetvit_mm.benchmark.plot import plot_scaling, scaling_title
from jetvit_mm.benchmark.sdpa import cudnn_teacher_entries
from jetvit_mm.benchmark.targets import distill_step_target, print_targets
from jetvit_mm.benchmark.timing import summarize, time_interleaved
from jetvit_mm.cli import check_inputs, check_outputs, finite, positive
from jetvit_mm.cli import count as count_arg
from jetvit_mm.dtypes import SHORT as MODEL_DTYPES
from jetvit_mm.jsonio import read_json_file
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.mixers.kernels import WINDOW_KERNELS
from jetvit_mm.models.token_reduction import SPEC_PATTERN, SPEC_SYNTAX

SUPERNET_ONLY_KEYS = ('search_space', 'step1_arch', 'freeze_mlp')

DESCRIPTIONS = {  # each subcommand's --help
    'mixers': """\
`mixers` times every token mixer alone (F, W, L with each conv variant, plus the bare qkv/proj projections
every mixer contains) and whole pre-norm blocks (mixer + timm Mlp ratio 4 + LayerNorms) for L-static vs
L-squeeze, all on the reference torch path, plus L-squeeze, W and the L-squeeze block on each ``--kernel`` (the
mixers' fast-path switch, default ``auto``: what a user gets; ``triton`` is L only, ``flex`` W only). Measurements
are interleaved: each repeat runs every entry once (rotating the start), so slow drifts of a shared machine hit all
entries alike. Reports median, min and max per entry and checks the targets of docs/benchmarks.md.""",
    'distill-step': """\
`distill-step` times one distillation training step of a supernet (path set to --arch) against a fixed-arch
student with the same arch, interleaved (the supernet's overhead target: at most 1.25x).""",
    'distill-kernels': """\
`distill-kernels` times one supernet distillation step (teacher forward, student forward + backward, AdamW) on the
fast mixer paths against the torch paths, per arch, all interleaved in one run (jetvit_mm/benchmark/
distill_kernels.py): on CUDA the eager fast paths (L: Triton with its Triton backward; W: FlexAttention's backward),
on the CPU the compiled student (no eager CPU fast path has a backward). The default archs (all-L, all-W and 2F;
--arch repeated picks others) put a slowdown down to L or W; --dtype bf16 (default) runs the forward under autocast
(fp32 weights and AdamW). Sizes where attention matters: --size 1024 2048 --batch 1, --size 512 1024 --batch 4.
Target on a GPU: the fast step >= x1.3 faster.""",
    'models': """\
`models` times whole JetViT forwards (random weights unless --checkpoint) for each arch at each --size, every
(size, arch) pair interleaved per repeat (so that both the speed-ups and the growth with size are measured side by
side), and reports latency (median, min, max), images/s, the peak memory of one forward (a fresh
process per arch and size: jetvit_mm/benchmark/memory.py), FLOPs with attention counted
(jetvit_mm/benchmark/flops.py) and the speed-up over the all-F teacher (always added unless --no-teacher).
Shortcuts: teacher = all F, all-L, all-W, 2F = a paper-style hybrid with two F layers (12 layers: LWLLWWLLWFLF).
``--baseline NAME=f2@1-9`` adds the training-free token-clustering baseline on the teacher (2x2 patch tokens per
cluster after block 1, full resolution again after block 9, every output the head reads reconstructed;
jetvit_mm/models/token_reduction.py), timed in the same round-robin and reported with its speed-up over the teacher
like the archs (FLOPs: the blocks' Linears and attention on the tokens they see; the clustering's own einsums are not
counted).
``--head dpt`` times the depth model instead (JetViT-DepthAnything: the backbone's four tapped layers and
DepthAnythingV2's DPT head, as in the paper's Table 4), e.g. ``--model dinov2_vitl14 --head dpt --size 518 1022``
or ``--config configs/depth/depthanything_large_eval.py --head dpt``; its FLOPs are the part ``head``.

On CUDA, ``--cuda-graph`` captures each timed call in a CUDA graph and times its replay: at batch 1 a ViT-B
forward launches hundreds of small kernels, and eager timing then measures the host's launch rate as much as the
GPU. With ``--compile`` too, each compiled model (torch.compile's default mode, no CUDA graphs of its own) is
captured the same way. `models` records the SDPA backend of every F layer (``sdpa_backends`` in the JSON) and, on
CUDA where cuDNN attention runs, also times the teacher with it (``teacher (cuDNN attention)``): every speed-up is
stated against the fastest teacher of its size (``reference`` in each row). ``--linear-cfg precision=mixed`` (any
L-mixer option, e.g. ``kernel=torch``) applies to every arch's L layers, ``--window-kernel`` to its W layers
(default: the model's, ``auto``). ``--patch-embed matmul`` computes every model's patch embedding as a reshape +
matmul instead of the convolution (same weights; jetvit_mm/models/patch_embed.py), for a GPU to compare the two.""",
    'plan': """\
`plan` is the memory planner: per-GPU parameters, gradients, AdamW states and activations of one distillation step
of each config, with and without activation checkpointing, and whether it fits (batch and size default to the
config's ``train_dataloader.batch_size`` and ``crop_size``; FSDP2 and its param dtype from ``model_wrapper_cfg``).
Nothing is allocated: the model is built on the meta device and the activations are counted from autograd's saved
tensors (jetvit_mm/benchmark/planner.py states every assumption).""",
    'plot': """\
`plot` draws the latency-vs-size plot of a saved `models` result (e.g. one measured on a GPU machine).""",
}
NOT_BUILD_KEYS = ('type', 'init_cfg', 'checkpoint', 'frozen')


def round_printer(rounds: int) -> Callable[[int, bool], None]:
    """The progress line after each interleaved round (``rounds`` = warmup + repeat)."""
    def on_round(done: int, warming_up: bool) -> None:
        print(f'  round {done}/{rounds}{" (warmup)" if warming_up else ""} done', flush=True)
    return on_round


def save_result(command: str, args: argparse.Namespace, measured: dict) -> dict:
    """The result as ``--json`` writes it: the subcommand, its arguments, then what was measured."""
    result = {'command': command, 'args': {k: v for k, v in vars(args).items() if k != 'func'}, **measured}
    if 'machine' not in result:  # every JSON records where and with what it was measured
        result['machine'] = machine_record(torch.device(getattr(args, 'device', 'cpu')), cpu_count=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    return result


def run_mixers(args: argparse.Namespace) -> dict:
    kept = prepare_host(args.threads, args.malloc, torch.device(args.device).type)
    check_cuda_graph(args, torch.device(args.device))
    measured = benchmark_mixers(grid=tuple(args.grid), dim=args.dim, heads=args.heads, batch=args.batch,
                                prefix=args.prefix, window=args.window, warmup=args.warmup, repeat=args.repeat,
                                dtype=args.dtype, device=args.device, rope=not args.no_rope,
                                cuda_graph=args.cuda_graph, malloc=args.malloc, malloc_kept=kept,
                                kernels=args.kernel or ('auto', ),
                                on_round=round_printer(args.warmup + args.repeat))
    return save_result('mixers', args, measured)


def run_distill_step(args: argparse.Namespace) -> dict:
    """One distillation training step (teacher forward, student forward + backward, AdamW) for a supernet with
    its path set to ``--arch`` vs a fixed-arch JetViT with that arch, interleaved: the pure ``Distiller`` and
    :func:`~jetvit_mm.benchmark.distill.distill_step`."""
    kept = prepare_host(args.threads, args.malloc, 'cpu')
    torch.manual_seed(0)
    backbone = dict(model_name=args.model, mixers=default_mixers(W=dict(window_size=args.window)))
    distillers = {'supernet (L/W candidates)': build_distiller(backbone, args.arch, supernet=True),
                  f'fixed arch {args.arch}': build_distiller(backbone, args.arch, supernet=False)}
    optimizers = {name: torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
                  for name, model in distillers.items()}
    x = torch.randn(args.batch, 3, *args.size)

    def step(name: str) -> None:
        model = distillers[name]
        if hasattr(model.student, 'set_arch'):
            model.student.set_arch(args.arch)  # what SupernetSamplerHook does before each iteration
        distill_step(model, optimizers[name], x)

    print(f'distill-step: {args.model}, input {args.size[0]}x{args.size[1]}, batch {args.batch}, arch {args.arch}, '
          f'{torch.get_num_threads()} threads{malloc_note(kept, torch.device("cpu"))}', flush=True)
    started = started_at()
    samples = time_interleaved({name: (lambda n=name: step(n)) for name in distillers}, args.warmup, args.repeat,
                               'cpu', on_round=round_printer(args.warmup + args.repeat))
    stats = summarize(samples)
    names = list(stats)
    ratio = stats[names[0]]['median_ms'] / stats[names[1]]['median_ms']
    for name, s in stats.items():
        print(f'| {name:<28} | median {s["median_ms"]:>9.1f} ms | min {s["min_ms"]:>9.1f} ms |')
    print_targets([distill_step_target(ratio)])
    return save_result('distill-step', args, {
        'date': started, 'malloc': malloc_record(args.malloc, kept, torch.device('cpu')), 'stats': stats,
        'samples_ms': samples, 'ratio_median': ratio})


def run_distill_kernels(args: argparse.Namespace) -> dict:
    """A supernet distillation step on the fast paths vs the torch paths, side by side, per arch."""
    from jetvit_mm.benchmark.distill_kernels import distill_kernels_benchmark

    kept = prepare_host(args.threads, 'keep', torch.device(args.device).type)
    args.arch = args.arch or list(DISTILL_KERNEL_ARCHS)
    print(f'distill-kernels: {args.model}, archs {" ".join(args.arch)}, input {args.size[0]}x{args.size[1]}, batch '
          f'{args.batch}, {args.dtype}{" (autocast)" if args.dtype == "bf16" else ""}, {args.device}, '
          f'{torch.get_num_threads()} threads{malloc_note(kept, torch.device(args.device))}', flush=True)
    started = started_at()
    try:
        measured = distill_kernels_benchmark(args.model, args.arch, tuple(args.size), args.batch, args.device,
                                             args.warmup, args.repeat, round_printer(args.warmup + args.repeat),
                                             dtype=args.dtype, fast_mode=args.fast_mode,
                                             **({} if args.depth is None else dict(depth=args.depth)))
    except ValueError as error:  # an arch that is no shortcut and no valid letter string
        raise SystemExit(f'distill-kernels: {error}') from None
    for name, s in measured['stats'].items():
        print(f'| {name:<28} | median {s["median_ms"]:>9.1f} ms | min {s["min_ms"]:>9.1f} ms |')
    for arch, ratio in measured['ratio_median'].items():
        print(f'{arch}: fast paths ({measured["fast_mode"]}) x{ratio:.2f} (torch / fast, medians); fast student\'s '
              f'paths {measured["fast_paths"][arch]}; first losses torch {measured["first_losses"][arch + " torch"]}'
              f', fast {measured["first_losses"][arch + " fast"]}')
    return save_result('distill-kernels', args, dict(date=started, **measured))


def backbone_from_config(path: str) -> dict:
    """JetViT keyword arguments of a config's ``model.backbone`` (or a distiller's ``model.student``)."""
    from jetvit_mm.mm.engine.launch import read_config

    model = read_config(path).model
    backbone = model.get('backbone') or model.get('student')
    if backbone is None:
        raise ValueError(f'{path}: model has neither a backbone nor a student to benchmark')
    backbone = backbone.to_dict() if hasattr(backbone, 'to_dict') else dict(backbone)
    kind = str(backbone.get('type', 'JetViT')).split('.')[-1]
    if kind not in ('JetViT', 'JetViTSupernet'):
        raise ValueError(f'{path}: backbone type {kind!r} is not a JetViT (or JetViTSupernet)')
    return {k: v for k, v in backbone.items() if k not in NOT_BUILD_KEYS + SUPERNET_ONLY_KEYS}


def head_from_args(args: argparse.Namespace, model_name: str) -> Optional[Dict[str, object]]:
    """``--head dpt``: the DPT widths of ``--config``'s ``DPTDepthHead`` (its own widths, else its preset) or else of
    the model's preset; None without a head."""
    if args.head == 'none':
        return None
    head = None
    if args.config:
        from jetvit_mm.mm.engine.launch import read_config

        head = read_config(args.config).model.get('decode_head')
        if head is not None and str(head.get('type', '')).split('.')[-1] != 'DPTDepthHead':
            raise ValueError(f'--head dpt: {args.config} has a {head.get("type")} decode head, not a DPTDepthHead')
    return dpt_widths(head, model_name)


def run_models(args: argparse.Namespace) -> dict:
    """Whole-model forward latency, throughput, peak memory and FLOPs per arch and input size, archs interleaved."""
    device = torch.device(args.device)
    kept = prepare_host(args.threads, args.malloc, device.type)  # the memory probes' fresh processes set their own
    check_cuda_graph(args, device)
    base = backbone_from_config(args.config) if args.config else {}
    config_arch = base.pop('arch', None)
    kwargs = jetvit_kwargs(base, args.model, args.window, args.linear_cfg or (), args.window_kernel)
    names = args.arch or ([config_arch or 'teacher'] if args.config else list(DEFAULT_ARCHS))
    head = head_from_args(args, kwargs['model_name'])
    entries = model_entries(kwargs, names, checkpoint=args.checkpoint, add_teacher=not args.no_teacher, head=head)
    entries += cudnn_teacher_entries(entries, device)  # CUDA: the teacher with cuDNN attention too, where it runs
    try:
        entries += baseline_entries(kwargs, args.baseline or (), [e['label'] for e in entries], head)
    except ValueError as error:
        raise SystemExit(f'models: {error}') from None
    measured = benchmark_models(
        entries, sizes=args.size, batch=args.batch, dtype=args.dtype, device=args.device, warmup=args.warmup,
        repeat=args.repeat, compile_model=args.compile, cuda_graph=args.cuda_graph, throughput=args.throughput,
        threads=args.threads, memory=not args.no_memory, profile=args.profile, malloc=args.malloc, malloc_kept=kept,
        on_round=round_printer(args.warmup + args.repeat), onnxruntime=args.onnxruntime, freeze=args.freeze,
        patch_embed=args.patch_embed)
    result = save_result('models', args, measured)
    if args.plot:
        plot_scaling(result['rows'], args.plot, scaling_title(result))
    return result


def run_plot(args: argparse.Namespace) -> dict:
    """Draw the scaling plot of a saved `models --json` result (e.g. one measured on another machine)."""
    result = read_json_file(args.result, 'a benchmark result (tools/benchmark.py models --json)', keys=('command', ))
    if result.get('command') != 'models' or not isinstance(result.get('rows'), list):
        raise SystemExit(f'{args.result} is not a `models` result (command={result.get("command")!r})')
    plot_scaling(result['rows'], args.out, scaling_title(result))
    print(f'wrote {args.out}')
    return result


def run_plan(args: argparse.Namespace) -> dict:
    """The memory plan of each config (jetvit_mm/mm/engine/memory_plan.py)."""
    from jetvit_mm.benchmark.planner import GIB, TABLE_HEADER, format_plan
    from jetvit_mm.mm.engine.launch import read_config
    from jetvit_mm.mm.engine.memory_plan import config_settings, plan_config

    plans = []
    print(f'memory plan: {args.world_size} GPUs x {args.gpu_mem_gb:g} GiB, reserve {args.reserve_gb:g} GiB (GiB per '
          'GPU; ckpt = per-block activation checkpointing)')
    print(TABLE_HEADER)
    for path in args.config:
        cfg = read_config(path)
        try:
            settings = config_settings(cfg)
            batch, size = args.batch or settings['batch'], args.size or settings['size']
            if not batch or not size:
                raise ValueError('no train_dataloader.batch_size / crop_size in the config: give --batch / --size')
            plan = plan_config(cfg, args.world_size, int(batch), tuple(size), int(args.gpu_mem_gb * GIB),
                               int(args.reserve_gb * GIB))
        except ValueError as error:
            raise SystemExit(f'plan {path}: {error}') from None
        plan['config'] = path
        plans.append(plan)
        name = f'{Path(path).stem}, batch {batch}, {size[0]}x{size[1]}, {plan["param_dtype"]}' + (
            ', FSDP2' if plan['fsdp'] else '')
        print(format_plan(name, plan), flush=True)
    return save_result('plan', args, {'plans': plans})


def key_value(text: str) -> Dict[str, object]:
    """``KEY=VALUE`` -> ``{KEY: VALUE}``; VALUE a Python literal where it is one (3, 0.5, None), else a string."""
    key, sep, value = text.partition('=')
    if not sep or not key:
        raise argparse.ArgumentTypeError(f'expected KEY=VALUE, got {text!r}')
    try:
        return {key: ast.literal_eval(value)}
    except (ValueError, SyntaxError):
        return {key: value}


def baseline_arg(text: str) -> Tuple[str, str]:
    """``NAME=SPEC`` -> ``(NAME, SPEC)``: a token-clustering baseline on the teacher (SPEC as
    :data:`jetvit_mm.models.token_reduction.SPEC_SYNTAX`; checked against the model's depth later)."""
    name, sep, spec = text.partition('=')
    if not sep or not name or not SPEC_PATTERN.fullmatch(spec.strip()):
        raise argparse.ArgumentTypeError(f'expected NAME={SPEC_SYNTAX}, got {text!r}')
    return name, spec.strip()


def check_cuda_graph(args: argparse.Namespace, device: torch.device) -> None:
    """Refuse ``--cuda-graph`` off CUDA (naming the device given) and ``--freeze`` without ``--compile``."""
    if args.cuda_graph and device.type != 'cuda':
        both = ' (with --compile too: the compiled model captured in CUDA graphs)' if getattr(args, 'compile', False) \
            else ''
        raise SystemExit(f'--cuda-graph needs --device cuda, got --device {device.type}{both}: CUDA graphs capture '
                         'GPU kernel launches')
    if getattr(args, 'freeze', False) and not getattr(args, 'compile', False):
        raise SystemExit('--freeze is an option of torch.compile: add --compile')




MALLOC_HELP = ('CPU: keep freed memory in the heap for the next call (default: no page faults from mapping big tensors '
               'again every call) or leave the system allocator policy')


def subcommand(sub: argparse._SubParsersAction, name: str, summary: str, warmup: Optional[int] = None,
               device: bool = True, malloc: bool = True) -> argparse.ArgumentParser:
    """A subcommand's parser, its :data:`DESCRIPTIONS` entry as its ``--help`` text; a timed one (``warmup`` given)
    with the options every timed subcommand takes: --warmup, --repeat, --threads, --device and --malloc (where it
    has them), --json."""
    parser = sub.add_parser(name, help=summary, description=DESCRIPTIONS[name],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    if warmup is None:
        return parser
    parser.add_argument('--warmup', type=count_arg, default=warmup)
    parser.add_argument('--repeat', type=positive, default=5)
    parser.add_argument('--threads', type=count_arg, default=0, help='torch threads on CPU (0: torch default)')
    if device:
        parser.add_argument('--device', choices=('cpu', 'cuda'), default='cpu')
    if malloc:
        parser.add_argument('--malloc', choices=MALLOC_POLICIES, default='keep', help=MALLOC_HELP)
    parser.add_argument('--json', type=Path, default=None, help='also write the result (stats, samples) here')
    return parser


def add_mixers_parser(sub: argparse._SubParsersAction) -> None:
    """The ``mixers`` subcommand's arguments."""
    mixers = subcommand(sub, 'mixers', 'per-mixer and per-block forward latency', warmup=2)
    mixers.add_argument('--grid', type=positive, nargs=2, default=(64, 128), metavar=('H', 'W'), help='patch grid')
    mixers.add_argument('--dim', type=positive, default=768)
    mixers.add_argument('--heads', type=positive, default=12)
    mixers.add_argument('--batch', type=positive, default=1)
    mixers.add_argument('--prefix', type=count_arg, default=5, help='prefix tokens (DINOv3: cls + 4 registers)')
    mixers.add_argument('--window', type=positive, default=16, help='window size of W')
    mixers.add_argument('--dtype', choices=sorted(MIXER_DTYPES), default='fp32')
    mixers.add_argument('--no-rope', action='store_true', help='no RoPE (DINOv2-style teacher)')
    mixers.add_argument('--cuda-graph', action='store_true', help='time CUDA-graph replays (CUDA only)')
    mixers.add_argument('--kernel', action='append', default=None, choices=FAST_KERNELS,
                        help='fast path(s) to time next to the torch reference, repeatable (default: auto); '
                             'triton is L only, flex W only')
    mixers.set_defaults(func=run_mixers)


def add_distill_step_parser(sub: argparse._SubParsersAction) -> None:
    """The ``distill-step`` subcommand's arguments."""
    step = subcommand(sub, 'distill-step', 'supernet vs fixed-arch distillation training step (CPU)', warmup=1,
                      device=False)
    step.add_argument('--model', default='dinov3_vitb16')
    step.add_argument('--arch', default='LWLWLWLWLWLW', help='the path both students run (L/W letters)')
    step.add_argument('--size', type=positive, nargs=2, default=(256, 512), metavar=('H', 'W'))
    step.add_argument('--batch', type=positive, default=2)
    step.add_argument('--window', type=positive, default=16)
    step.set_defaults(func=run_distill_step)


def add_distill_kernels_parser(sub: argparse._SubParsersAction) -> None:
    """The ``distill-kernels`` subcommand's arguments."""
    kern = subcommand(sub, 'distill-kernels', 'supernet distillation step: fast paths vs torch paths', warmup=2,
                      malloc=False)
    kern.add_argument('--model', default='dinov3_vits16')
    kern.add_argument('--arch', action='append', default=None,
                      help=f'a supernet path, repeatable, each timed on both paths: a shortcut (all-L, all-W, 2F) or '
                           f'L/W/F letters, one per layer; default: {" ".join(DISTILL_KERNEL_ARCHS)}')
    kern.add_argument('--size', type=positive, nargs=2, default=(224, 224), metavar=('H', 'W'))
    kern.add_argument('--batch', type=positive, default=2)
    kern.add_argument('--depth', type=positive, default=None, help='a toy with fewer layers (default: the model\'s)')
    kern.add_argument('--dtype', default='bf16', choices=('bf16', 'fp32'),
                      help='bf16: forward under autocast (fp32 weights and AdamW); fp32: everything fp32')
    kern.add_argument('--fast-mode', default='auto', choices=('auto', 'eager', 'compiled'),
                      help='the fast step eager or compiled (auto: eager on CUDA, compiled on the CPU)')
    kern.set_defaults(func=run_distill_kernels)


def add_models_parser(sub: argparse._SubParsersAction) -> None:
    """The ``models`` subcommand's arguments."""
    models = subcommand(sub, 'models', 'whole-model latency, throughput, memory, FLOPs per arch and size', warmup=1)
    models.add_argument('--model', default='dinov3_vitb16', help='teacher variant (ignored with --config)')
    models.add_argument('--arch', action='append', default=None,
                        help=f'arch string or shortcut ({", ".join(ARCH_SHORTCUTS)}), repeatable; '
                             f'default: {" ".join(DEFAULT_ARCHS)} (the config\'s arch with --config)')
    models.add_argument('--baseline', type=baseline_arg, action='append', default=None, metavar='NAME=SPEC',
                        help='also time the teacher with training-free token clustering (jetvit_mm/models/'
                             'token_reduction.py), labelled NAME, repeatable; SPEC f<FACTOR>@<AFTER>[-<UNTIL>]: '
                             'FACTOR x FACTOR patch tokens per cluster, clustered after block AFTER (0-based), full '
                             'resolution again after block UNTIL (default: the last), e.g. --baseline tc=f2@1-9')
    models.add_argument('--config', default=None, help='take the JetViT arguments from this config\'s model.backbone')
    models.add_argument('--checkpoint', type=Path, default=None,
                        help='exported JetViT checkpoint for the one non-teacher --arch (otherwise random weights); '
                             'with --head dpt an export with its head (hybrid_<arch>_with_head.pth)')
    models.add_argument('--window', type=positive, default=None, help='window size of W (default: model / config)')
    models.add_argument('--size', type=positive, nargs=2, action='append', default=None, metavar=('H', 'W'),
                        help='input size in pixels, repeatable (default: 32 x 64 and 64 x 128 patches: 512 1024 and '
                             '1024 2048 at patch 16, 448 896 and 896 1792 at patch 14)')
    models.add_argument('--batch', type=positive, default=1, help='batch of the latency run')
    models.add_argument('--dtype', choices=tuple(MODEL_DTYPES), default='fp32')
    models.add_argument('--compile', action='store_true', help='time torch.compile(model) (memory probe: eager)')
    models.add_argument('--freeze', action='store_true',
                        help='with --compile: inductor freezing for every model (torch._inductor.config.freezing: '
                             'weights as constants, CPU Linears prepacked for oneDNN with their bias and GELU fused)')
    models.add_argument('--cuda-graph', action='store_true',
                        help='time CUDA-graph replays (CUDA only; with --compile: of the compiled models)')
    models.add_argument('--linear-cfg', type=key_value, action='append', default=None, metavar='KEY=VALUE',
                        help='an L-mixer option for every arch, e.g. precision=mixed, conv=static, kernel_size=5')
    models.add_argument('--throughput', type=positive, nargs='?', const=-1, default=None, metavar='BATCH',
                        help='also time this batch for images/s; without a value: the largest power-of-two batch '
                             'that fits (CUDA) or --batch (CPU). Default: images/s of the latency run')
    models.add_argument('--patch-embed', choices=('conv', 'matmul'), default='conv',
                        help='the patch embedding as the convolution or as a reshape + matmul (same weights)')
    models.add_argument('--window-kernel', choices=WINDOW_KERNELS, default=None,
                        help='W layers\' implementation for every arch (default: the model\'s own, auto)')
    models.add_argument('--head', choices=('none', 'dpt'), default='none',
                        help='dpt: time the depth model of the paper\'s Table 4, the backbone (a DINOv2 model) and '
                             'DepthAnythingV2\'s DPT head (widths from --config\'s decode_head, else the model\'s '
                             'preset); sizes must be multiples of 14')
    models.add_argument('--onnxruntime', nargs='?', const='dynamic', default=None, choices=('dynamic', 'fixed'),
                        help='also time each model\'s ONNX export in an onnxruntime CPU session, in the same '
                             'interleaved run (fp32, CPU; needs the deploy extra): one export for every size '
                             '(dynamic, the default; W as masked full attention) or one per size (fixed: W keeps '
                             'its windows)')
    models.add_argument('--no-teacher', action='store_true', help='do not add the all-F teacher as reference')
    models.add_argument('--no-memory', action='store_true', help='skip the peak-memory processes')
    models.add_argument('--profile', action='store_true',
                        help='at the largest size: per-block times and torch.profiler top ops per arch')
    models.add_argument('--plot', type=Path, default=None, help='PNG of latency vs input size per arch')
    models.set_defaults(func=run_models)


def add_plan_parser(sub: argparse._SubParsersAction) -> None:
    """The ``plan`` subcommand's arguments."""
    plan = subcommand(sub, 'plan', 'memory planner: per-GPU memory of a distillation step, and whether it fits')
    plan.add_argument('config', nargs='+', help='distillation config(s)')
    plan.add_argument('--world-size', type=positive, required=True, help='number of GPUs (processes)')
    plan.add_argument('--batch', type=positive, default=None, help='per-GPU batch (default: the config\'s)')
    plan.add_argument('--size', type=positive, nargs=2, default=None, metavar=('H', 'W'),
                      help='input size in pixels, a multiple of the patch (default: the config\'s crop_size)')
    plan.add_argument('--gpu-mem-gb', type=finite(above=0), default=80.0, help='memory per GPU, GiB')
    plan.add_argument('--reserve-gb', type=finite(minimum=0), default=0.0,
                      help='GiB per GPU held back (CUDA context, NCCL, fragmentation: not modelled)')
    plan.add_argument('--json', type=Path, default=None)
    plan.set_defaults(func=run_plan)


def add_plot_parser(sub: argparse._SubParsersAction) -> None:
    """The ``plot`` subcommand's arguments."""
    plot = subcommand(sub, 'plot', 'scaling plot (PNG) of a saved `models --json` result')
    plot.add_argument('result', type=Path)
    plot.add_argument('--out', type=Path, required=True)
    plot.set_defaults(func=run_plot)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='command', required=True)
    add_mixers_parser(sub)
    add_distill_step_parser(sub)
    add_distill_kernels_parser(sub)
    add_models_parser(sub)
    add_plan_parser(sub)
    add_plot_parser(sub)
    args = parser.parse_args(argv)
    check_inputs(parser, args, ('checkpoint', 'result') + (() if args.command == 'plan' else ('config', )))
    for path in (args.config if args.command == 'plan' else ()):
        if not Path(path).is_file():
            parser.error(f'config file not found: {path}')
    check_outputs(parser, args, files=('json', 'plot', 'out'))
    return args


def main(argv: Optional[List[str]] = None) -> dict:
    args = parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    main()
