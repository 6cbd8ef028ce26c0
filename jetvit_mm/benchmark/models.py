"""The whole-model benchmark: JetViT forwards (or JetViT + DPT depth head) per arch and input size, every (size, arch)
pair timed in one interleaved round-robin, with images/s, the peak memory of one forward, FLOPs with attention
counted and the speed-up over the all-F teacher."""
import contextlib
import functools
import os
import statistics
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from jetvit_mm.dtypes import to_dtype
from jetvit_mm.models.arch import mixer_table_of
from jetvit_mm.models.heads.dpt import dpt_preset
from jetvit_mm.models.mixers import DEFAULT_MIXERS
from jetvit_mm.models.patch_embed import set_patch_embed_
from jetvit_mm.models.teachers import teacher_depth
from jetvit_mm.models.token_reduction import parse_cluster_spec

from .archs import ARCH_SHORTCUTS, resolve_arch
from .contention import QUIET_CORES, CpuContention, quiet_stats
from .flops import count_flops
from .host import machine_record, malloc_note, malloc_record, started_at
from .kernel_check import paths_ran
from .memory import build_model, cuda_forward_memory, measure_forward_memory
from .onnx_runtime import ORT_SUFFIX
from .profile import backbone_of, block_times, profile_model
from .sdpa import make_runners, sdpa_backends
from .targets import model_targets, print_targets
from .timing import maybe_graphed, summarize, time_interleaved

DEFAULT_ARCHS = ('teacher', '2F', 'all-L')
MIB = 2 ** 20
Entry = Dict[str, object]


def jetvit_kwargs(base: Mapping[str, object], model_name: str, window: Optional[int] = None,
                  linear_options: Sequence[Mapping[str, object]] = (),
                  window_kernel: Optional[str] = None) -> Dict[str, object]:
    """JetViT keyword arguments (no arch) from ``base`` (e.g. a config's backbone), ``model_name`` where ``base``
    names none, and over its mixer table (``mixers``, default the default one): a window size and the W layers'
    implementation (``mixers.W.window_size`` / ``kernel``) and L-mixer options (each merged into ``mixers.L``)."""
    kwargs = dict(base)
    kwargs.setdefault('model_name', model_name)
    table = {k: dict(v) for k, v in (kwargs.get('mixers') or DEFAULT_MIXERS).items()}
    window_options = {k: v for k, v in (('window_size', window), ('kernel', window_kernel)) if v is not None}
    for letter, options in (('W', [window_options] if window_options else []), ('L', linear_options)):
        for option in options:
            if letter not in table:
                raise ValueError(f'the model declares no {letter!r} mixer (letters: {sorted(table)}), so '
                                 f'{dict(option)} cannot apply to it')
            table[letter].update(option)
    if table != (kwargs.get('mixers') or DEFAULT_MIXERS):
        kwargs['mixers'] = table
    return kwargs


def dpt_widths(head: Optional[Mapping[str, object]], model_name: str) -> Dict[str, object]:
    """The DPT head's widths (``features``, ``out_channels``): a ``DPTDepthHead`` config's own, its preset's for what
    it does not give (as the head does), or ``model_name``'s preset without a head config."""
    features = head.get('features') if head else None
    out_channels = head.get('out_channels') if head else None
    if features is None or out_channels is None:
        preset = dpt_preset(head.get('preset') or model_name if head else model_name)
        features = preset.features if features is None else features
        out_channels = preset.out_channels if out_channels is None else out_channels
    return {'features': int(features), 'out_channels': [int(c) for c in out_channels]}


def model_entries(kwargs: Mapping[str, object], names: Sequence[str], checkpoint: Optional[str] = None,
                  add_teacher: bool = True, head: Optional[Dict[str, object]] = None) -> List[Entry]:
    """What the benchmark measures: one dict per arch (shortcut or arch string) with its label, arch string, JetViT
    keyword arguments and head (None, or the DPT widths). ``checkpoint`` goes to the one non-teacher arch; the
    all-F teacher is added first unless ``add_teacher`` is False or it is there already."""
    depth = teacher_depth(kwargs['model_name']) if kwargs.get('depth') is None else int(kwargs['depth'])
    teacher = 'F' * depth
    letters = mixer_table_of(kwargs).letters  # the declared letters (mixers=, default L, W, F)
    if checkpoint and len([n for n in names if resolve_arch(n, depth, letters) != teacher]) != 1:
        raise ValueError('--checkpoint needs exactly one non-teacher --arch: the exported hybrid\'s arch')
    entries: List[Entry] = []
    for name in names:
        arch = resolve_arch(name, depth, letters)
        entry_kwargs = dict(kwargs, arch=arch)
        if checkpoint and arch != teacher:
            entry_kwargs['checkpoint'] = str(checkpoint)
        label = name if name in ARCH_SHORTCUTS else arch
        if label in [e['label'] for e in entries]:
            continue
        entries.append({'label': label, 'arch': arch, 'kwargs': entry_kwargs, 'head': head})
    if add_teacher and teacher not in [e['arch'] for e in entries]:
        entries.insert(0, {'label': 'teacher', 'arch': teacher, 'kwargs': dict(kwargs, arch=teacher), 'head': head})
    return entries


def baseline_entries(kwargs: Mapping[str, object], baselines: Sequence[Tuple[str, str]], taken: Sequence[str],
                     head: Optional[Dict[str, object]] = None) -> List[Entry]:
    """One entry per ``(name, clustering spec)``: the teacher (all F) with training-free token clustering
    (:mod:`jetvit_mm.models.token_reduction`, e.g. ``f2@3``), labelled ``name``; ``taken``: the labels in use."""
    depth = teacher_depth(kwargs['model_name']) if kwargs.get('depth') is None else int(kwargs['depth'])
    entries: List[Entry] = []
    for name, spec in baselines:
        if not name or name in taken or name in [e['label'] for e in entries]:
            raise ValueError(f'--baseline {name}={spec}: the name must be non-empty and not another entry\'s label '
                             f'(in use: {", ".join(list(taken) + [e["label"] for e in entries])})')
        text = parse_cluster_spec(spec, depth).text
        entries.append({'label': name, 'arch': 'F' * depth, 'kwargs': dict(kwargs, arch='F' * depth, clustering=text),
                        'head': head, 'baseline': text})
    return entries


def default_sizes(patch_size: int) -> List[Tuple[int, int]]:
    """The default input sizes: 32 x 64 and 64 x 128 patches (512x1024 and 1024x2048 at patch 16)."""
    return [(32 * patch_size, 64 * patch_size), (64 * patch_size, 128 * patch_size)]


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


@contextlib.contextmanager
def inductor_freezing(enabled: bool) -> Iterator[None]:
    """Inductor's ``freezing`` switched on for the block when ``enabled`` (a process setting: torch 2.14 ignores
    ``torch.compile(options={'freezing': True})``), and put back after it."""
    if not enabled:
        yield
        return
    import torch._inductor.config as inductor_config

    with inductor_config.patch(freezing=True):
        yield


def _freezing_while_running(benchmark: Callable[..., Dict[str, object]]) -> Callable[..., Dict[str, object]]:
    """``benchmark`` run inside :func:`inductor_freezing` of its ``freeze`` argument."""
    @functools.wraps(benchmark)
    def run(*args: Any, **kwargs: Any) -> Dict[str, object]:
        with inductor_freezing(kwargs.get('freeze', False)):
            return benchmark(*args, **kwargs)
    return run


@_freezing_while_running
def benchmark_models(entries: List[Entry], *, sizes: Optional[Sequence[Tuple[int, int]]], batch: int, dtype: str,
                     device: str, warmup: int, repeat: int, compile_model: bool, cuda_graph: bool,
                     throughput: Optional[int], threads: int, memory: bool, profile: bool, malloc: str,
                     malloc_kept: bool, on_round: Optional[Callable[[int, bool], None]] = None,
                     onnxruntime: Union[bool, str] = False, freeze: bool = False,
                     patch_embed: str = 'conv') -> Dict[str, object]:
    """Latency (median, min, max, and of the quiet samples), images/s, FLOPs, peak memory and speed-ups of every
    entry at every size (default: 32 x 64 and 64 x 128 patches); prints the table and the targets and returns the
    result. ``onnxruntime``: also each model's ONNX export in an onnxruntime CPU session, in the same rounds
    (``'fixed'``: exported once per size, W windowed). ``freeze`` (with ``compile_model``): inductor's freezing."""
    dev, torch_dtype = torch.device(device), to_dtype(dtype)
    models: Dict[str, nn.Module] = {}
    for e in entries:
        torch.manual_seed(0)  # the same random weights wherever two archs share them
        model = build_model(e['kwargs'], e['head']).to(device=dev, dtype=torch_dtype).eval()
        models[e['label']] = set_patch_embed_(model, patch_embed)
    sizes = [tuple(s) for s in (sizes or default_sizes(backbone_of(models[entries[0]['label']]).patch_size))]
    started = started_at()
    load_start = os.getloadavg()
    print(f'models: {", ".join(e["label"] + " " + e["arch"] for e in entries)}'
          f'{" + DPT head " + str(entries[0]["head"]) if entries[0]["head"] else ""}; sizes '
          f'{", ".join(f"{h}x{w}" for h, w in sizes)}; batch {batch}, {dtype} on {device}, '
          f'{torch.get_num_threads()} threads, load average {load_start[0]:.2f}'
          f'{", CUDA graphs" if cuda_graph else ""}{malloc_note(malloc_kept, dev)}', flush=True)
    runners = make_runners(models, entries, compile_model, cuda_graph)
    pair_samples, others = time_latency(models, runners, sizes, batch, dev, torch_dtype, warmup, repeat, cuda_graph,
                                        threads, onnxruntime, on_round)
    rows: List[Dict[str, object]] = []
    samples: Dict[str, Dict[str, List[float]]] = {}
    for h, w in sizes:
        key = f'{h}x{w}'
        samples[key] = {name[len(key) + 1:]: times for name, times in pair_samples.items()
                        if name.startswith(f'{key} ')}
        stats = summarize(samples[key])
        for label in stats:
            stats[label].update(quiet_stats(samples[key][label], others[f'{key} {label}'][warmup:]))
        images_per_s = throughput_of(runners, stats, (h, w), batch, throughput, dev, torch_dtype, warmup, repeat,
                                     cuda_graph, on_round)
        rows.extend(size_rows(entries, models, (h, w), stats, images_per_s, batch))
    add_speedups(rows, 'F' * backbone_of(models[entries[0]['label']]).depth)

    if memory:
        add_peak_memory([r for r in rows if r.get('runtime') != 'onnxruntime'], entries, models, batch, dtype, device,
                        threads)
    profiles = profile_entries(entries, models, max(sizes, key=lambda size: size[0] * size[1]), dev, torch_dtype) \
        if profile else {}
    load_end = os.getloadavg()
    targets = model_targets(rows, (dev.type, dtype, compile_model or cuda_graph))
    print_models_table(rows, targets, profiles)
    print(f'\nload average: {load_start[0]:.2f} at start, {load_end[0]:.2f} at end', flush=True)
    return {
        'date': started, 'machine': machine_record(dev, cpu_count=True),
        'load_average': {'start': load_start, 'end': load_end}, 'malloc': malloc_record(malloc, malloc_kept, dev),
        'entries': [{k: e.get(k) for k in ('label', 'arch', 'kwargs', 'head', 'baseline', 'sdpa_backend')}
                    for e in entries],
        'sdpa_backends': sdpa_backends(models, entries, sizes, batch, torch_dtype, dev),
        'rows': rows, 'samples_ms': samples, 'targets': targets, 'profiles': profiles,
    }


def time_latency(models: Dict[str, nn.Module], runners: Dict[str, Callable], sizes: List[Tuple[int, int]], batch: int,
                 dev: torch.device, torch_dtype: torch.dtype, warmup: int, repeat: int, cuda_graph: bool, threads: int,
                 onnxruntime: Union[bool, str], on_round: Optional[Callable[[int, bool], None]]
                 ) -> Tuple[Dict[str, List[float]], Dict[str, List[Optional[float]]]]:
    """Every (size, arch) pair (and its onnxruntime session) in one round-robin, so that sizes are measured side by
    side: the samples per ``'<H>x<W> <label>'`` and, per sample, how busy the other cores were (CPU)."""
    print(f'\nlatency at batch {batch}, sizes and archs interleaved', flush=True)
    probe = CpuContention(enabled=dev.type == 'cpu')  # on CUDA it would read /proc inside the event window
    calls: Dict[str, Callable[[], torch.Tensor]] = {}
    with torch.inference_mode():
        for h, w in sizes:
            x = torch.randn(batch, 3, h, w, device=dev, dtype=torch_dtype)
            calls.update(maybe_graphed({f'{h}x{w} {label}': (lambda m=m, x=x: m(x)) for label, m in runners.items()},
                                       cuda_graph))
    if onnxruntime:
        from .onnx_runtime import onnx_calls

        calls.update(onnx_calls(models, sizes, batch, threads, dev, torch_dtype, fixed=onnxruntime == 'fixed'))
    others: Dict[str, List[Optional[float]]] = {name: [] for name in calls}

    def run(name: str) -> torch.Tensor:
        before = probe.snapshot()
        out = calls[name]()
        others[name].append(probe.others_cores(before, probe.snapshot()))
        return out

    with torch.inference_mode():
        pair_samples = time_interleaved({name: (lambda name=name: run(name)) for name in calls}, warmup, repeat,
                                        dev, on_round=on_round)
    calls.clear()  # frees the inputs (and CUDA graphs) before the throughput runs
    return pair_samples, others


def throughput_of(runners: Dict[str, Callable], stats: Dict[str, Dict[str, float]], size: Tuple[int, int],
                  batch: int, throughput: Optional[int], dev: torch.device, torch_dtype: torch.dtype, warmup: int,
                  repeat: int, cuda_graph: bool, on_round: Optional[Callable[[int, bool], None]]
                  ) -> Dict[str, Tuple[int, float]]:
    """``{label: (batch, images/s)}`` at ``size``: of the latency run, or of a run at the ``throughput`` batch (-1:
    the largest power-of-two batch that fits on CUDA)."""
    images_per_s = {label: (batch, batch * 1e3 / s['median_ms']) for label, s in stats.items()}
    if throughput is None or not (throughput > 0 or dev.type == 'cuda'):
        return images_per_s
    h, w = size
    batches = {label: (throughput if throughput > 0 else largest_cuda_batch(m, (h, w), torch_dtype, dev))
               for label, m in runners.items()}
    if all(b == batch for b in batches.values()):
        return images_per_s
    print(f'{h}x{w}: throughput at batch {batches}', flush=True)
    inputs = {b: torch.randn(b, 3, h, w, device=dev, dtype=torch_dtype) for b in set(batches.values())}
    with torch.inference_mode():
        tp_calls = maybe_graphed({label: (lambda m=m, xb=inputs[batches[label]]: m(xb))
                                  for label, m in runners.items()}, cuda_graph)
        tp = summarize(time_interleaved(tp_calls, warmup, repeat, dev, on_round=on_round))
    del tp_calls, inputs
    return {**images_per_s, **{label: (batches[label], batches[label] * 1e3 / tp[label]['median_ms'])
                               for label in runners}}


def size_rows(entries: List[Entry], models: Dict[str, nn.Module], size: Tuple[int, int],
              stats: Dict[str, Dict[str, float]], images_per_s: Dict[str, Tuple[int, float]],
              batch: int) -> List[Dict[str, object]]:
    """The result rows of one size: per entry its FLOPs, latency statistics and images/s, and the row of its ONNX
    export where one was timed in the same round-robin."""
    h, w = size
    rows: List[Dict[str, object]] = []
    for e in entries:
        label = e['label']
        flops = count_flops(models[label], (h, w))
        patch = backbone_of(models[label]).patch_size
        rows.append({'size': f'{h}x{w}', 'tokens': (h // patch) * (w // patch), 'patch_size': patch,
                     'label': label, 'arch': e['arch'], 'baseline': e.get('baseline'), 'gflops': flops['gflops'],
                     'gflops_by_part': {k: v / 1e9 for k, v in flops['by_part'].items()},
                     **stats[label], 'throughput_batch': images_per_s[label][0],
                     'images_per_s': images_per_s[label][1], 'paths': paths_ran(models[label])})
        ort = f'{label}{ORT_SUFFIX}'
        if ort in stats:
            rows.append({**rows[-1], 'label': ort, 'runtime': 'onnxruntime', **stats[ort],
                         'throughput_batch': batch, 'images_per_s': batch * 1e3 / stats[ort]['median_ms']})
    return rows


def add_peak_memory(rows: List[Dict[str, object]], entries: List[Entry], models: Dict[str, nn.Module], batch: int,
                    dtype: str, device: str, threads: int) -> None:
    """Each row's peak memory of one forward: in this process on CUDA, in a fresh process per row on CPU."""
    dev, torch_dtype = torch.device(device), to_dtype(dtype)
    print('\npeak memory: ' + ('torch.cuda.max_memory_allocated per arch and size' if dev.type == 'cuda'
                                else 'one fresh process per arch and size'), flush=True)
    for row in rows:
        e = next(e for e in entries if e['label'] == row['label'])
        h, w = (int(v) for v in str(row['size']).split('x'))
        if dev.type == 'cuda':  # exact in this process: the allocator counts live tensors only
            x = torch.randn(batch, 3, h, w, device=dev, dtype=torch_dtype)
            mem = cuda_forward_memory(models[row['label']], x)
            del x
        else:  # RSS needs a fresh process per (arch, size)
            mem = measure_forward_memory(e['kwargs'], (batch, 3, h, w), dtype, device, threads, head=e['head'])
        row['memory'] = mem
        row['peak_increase_mib'] = mem['peak_increase_bytes'] / MIB
        print(f'  {row["size"]} {row["label"]}: +{row["peak_increase_mib"]:.0f} MiB ({mem["method"]})', flush=True)


def profile_entries(entries: List[Entry], models: Dict[str, nn.Module], size: Tuple[int, int], device: torch.device,
                    dtype: torch.dtype) -> Dict[str, Dict[str, object]]:
    """Per entry at ``size``, batch 1: each block's time, the mean block time per mixer letter, the top ops."""
    h, w = size
    x = torch.randn(1, 3, h, w, device=device, dtype=dtype)
    print(f'\nprofile at {h}x{w}, batch 1 (block times, then torch.profiler top ops)', flush=True)
    profiles = {}
    for e in entries:
        model = models[e['label']]
        times = block_times(model, x, device)
        per_letter = {letter: statistics.mean(t for t, a in zip(times, e['arch']) if a == letter)
                      for letter in sorted(set(e['arch']))}
        profiles[e['label']] = {'block_ms': times, 'mean_block_ms_by_mixer': per_letter,
                                'top_ops': profile_model(model, x, device)}
    return profiles


def add_speedups(rows: List[Dict[str, object]], teacher: str) -> None:
    """Each row's speed-up over the fastest teacher row of its size (by median; the teacher with cuDNN attention
    too where it was timed): median, min, and median of the quiet samples; ``reference``: that row's label."""
    for row in rows:
        ref = min((r for r in rows if r['size'] == row['size'] and r['arch'] == teacher and not r.get('baseline')
                   and r.get('runtime') != 'onnxruntime'), key=lambda r: r['median_ms'], default=None)
        row['reference'] = ref['label'] if ref else None
        row['speedup'] = ref['median_ms'] / row['median_ms'] if ref else None
        row['speedup_min'] = ref['min_ms'] / row['min_ms'] if ref else None
        quiet = ref and ref.get('quiet_median_ms') and row.get('quiet_median_ms')
        row['speedup_quiet'] = ref['quiet_median_ms'] / row['quiet_median_ms'] if quiet else None


def _mixer_counts(arch: str) -> str:
    return ' '.join(f'{arch.count(letter)}{letter}' for letter in 'FWL' if arch.count(letter))


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
        mixers = _mixer_counts(str(r['arch'])) + (f' {r["baseline"]}' if r.get('baseline') else '')
        cells = [r['size'], name, mixers, f'{r["gflops"]:.1f}', f'{r["median_ms"]:.1f}',
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
    print_targets(targets)
