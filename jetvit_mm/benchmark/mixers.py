"""The token-mixer benchmark: every mixer alone (F, W, L with each conv variant, plus the bare qkv/proj Linears every
mixer owns) and whole pre-norm blocks for L-static vs L-squeeze, timed in interleaved rounds."""
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from timm.layers import Mlp, RotaryEmbeddingDinoV3
from torch import nn

from jetvit_mm.dtypes import to_dtype
from jetvit_mm.models.jetvit import JetBlock
from jetvit_mm.models.mixers import build_mixer, default_mixers
from jetvit_mm.models.mixers.kernels import LINEAR_KERNELS, WINDOW_KERNELS

from .host import machine_record, malloc_note, malloc_record, started_at
from .kernel_check import paths_ran
from .targets import mixer_targets, print_targets
from .timing import maybe_graphed, summarize, time_interleaved

DTYPE_CHOICES = ('fp32', 'bf16')  # the mixer table's --dtype
LINEAR_CONVS = ('none', 'static', 'squeeze', 'token')
FAST_KERNELS = tuple(sorted(set(LINEAR_KERNELS + WINDOW_KERNELS) - {'torch'}))


class Projections(nn.Module):
    """Only the qkv and proj Linears every mixer owns: the floor under any mixer's latency."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor] = None):
        return self.proj(self.qkv(x)[..., : x.shape[-1]])


def mixer_block(dim: int, mixer: nn.Module, mlp_ratio: float = 4.) -> JetBlock:
    """JetViT's pre-norm block around ``mixer`` without LayerScale: x + mixer(norm1(x)), then x + mlp(norm2(x))
    (timm ``Mlp``)."""
    return JetBlock(nn.LayerNorm(dim, eps=1e-5), mixer, nn.Identity(), nn.Identity(),
                    nn.LayerNorm(dim, eps=1e-5), Mlp(dim, int(dim * mlp_ratio)), nn.Identity(), nn.Identity())


def mixer_entries(dim: int, heads: int, prefix: int, window: int, dtype: str,
                  kernels: Sequence[str] = ('auto', )) -> Dict[str, nn.Module]:
    """Everything the mixer benchmark times, by display name: the reference (torch) path of every mixer, then
    L-squeeze, W and the L-squeeze block on each of ``kernels`` (the mixers' fast-path switch; ``triton`` is L only,
    ``flex`` W only)."""
    common = dict(dim=dim, num_heads=heads, num_prefix_tokens=prefix)
    torch_l = {'kernel': 'torch'}
    entries: Dict[str, nn.Module] = {
        'qkv+proj only': Projections(dim),
        'F': build_mixer('F', **common),
        f'W{window}': build_mixer('W', **common, mixers=default_mixers(W=dict(window_size=window, kernel='torch'))),
    }
    for conv in LINEAR_CONVS:
        entries[f'L-{conv}'] = build_mixer('L', **common, mixers=default_mixers(L={'conv': conv, **torch_l}))
    entries['L-squeeze focus3'] = build_mixer('L', **common, mixers=default_mixers(
        L={'conv': 'squeeze', 'focusing': 3.0, **torch_l}))
    if dtype != 'fp32':  # in fp32 the same computation as L-squeeze
        entries['L-squeeze mixed'] = build_mixer('L', **common, mixers=default_mixers(
            L={'conv': 'squeeze', 'precision': 'mixed', **torch_l}))
    for conv in ('static', 'squeeze'):
        entries[f'block L-{conv}'] = mixer_block(dim, build_mixer('L', **common, mixers=default_mixers(
            L={'conv': conv, **torch_l})))
    for kernel in kernels:
        if kernel in LINEAR_KERNELS:
            fast_l = default_mixers(L={'conv': 'squeeze', 'kernel': kernel})
            entries[f'L-squeeze {kernel}'] = build_mixer('L', **common, mixers=fast_l)
            entries[f'block L-squeeze {kernel}'] = mixer_block(dim, build_mixer('L', **common, mixers=fast_l))
        if kernel in WINDOW_KERNELS:
            entries[f'W{window} {kernel}'] = build_mixer('W', **common, mixers=default_mixers(
                W=dict(window_size=window, kernel=kernel)))
    return entries


def benchmark_mixers(*, grid: Tuple[int, int], dim: int, heads: int, batch: int, prefix: int, window: int,
                     warmup: int, repeat: int, dtype: str, device: str, rope: bool, cuda_graph: bool,
                     malloc: str, malloc_kept: bool, kernels: Sequence[str] = ('auto', ),
                     on_round: Optional[Callable[[int, bool], None]] = None) -> Dict[str, object]:
    """Time :func:`mixer_entries` on ``batch`` x (``prefix`` + h * w) tokens; prints the table and the targets and
    returns the result (date, machine, allocator, stats, samples, targets)."""
    dev, torch_dtype = torch.device(device), to_dtype(dtype, valid=DTYPE_CHOICES)
    torch.manual_seed(0)
    h, w = grid
    x = torch.randn(batch, prefix + h * w, dim, device=dev, dtype=torch_dtype)
    rope_table = None
    if rope:
        rope_table = RotaryEmbeddingDinoV3(dim // heads, temperature=100).get_embed(shape=(h, w)).to(dev)
    entries = {name: m.to(device=dev, dtype=torch_dtype).eval()
               for name, m in mixer_entries(dim, heads, prefix, window, dtype, kernels).items()}
    print(f'mixers: grid {h}x{w} (+{prefix} prefix), dim {dim}, {heads} heads, batch {batch}, '
          f'{dtype} on {device}, {torch.get_num_threads()} threads, rope {rope_table is not None}'
          f'{", CUDA graphs" if cuda_graph else ""}{malloc_note(malloc_kept, dev)}', flush=True)
    started = started_at()
    with torch.inference_mode():
        calls = maybe_graphed({name: (lambda m=m: m(x, (h, w), rope_table)) for name, m in entries.items()},
                              cuda_graph)
        samples = time_interleaved(calls, warmup, repeat, dev, on_round=on_round)
    stats = summarize(samples)
    targets = mixer_targets(stats)
    print_mixer_table(stats, targets)
    return {'date': started, 'machine': machine_record(dev), 'malloc': malloc_record(malloc, malloc_kept, dev),
            'stats': stats, 'samples_ms': samples, 'targets': targets,
            'paths': {name: paths_ran(m) for name, m in entries.items()}}  # what ran, the self-check verdicts read


def print_mixer_table(stats: Dict[str, Dict[str, float]], targets: List[Dict[str, object]]) -> None:
    full = stats['F']['median_ms']
    print(f'\n| {"entry":<18} | {"median ms":>10} | {"min ms":>10} | {"max ms":>10} | {"/ F":>6} |')
    print(f'|{"-" * 20}|{"-" * 12}|{"-" * 12}|{"-" * 12}|{"-" * 8}|')
    for name, s in stats.items():
        print(f'| {name:<18} | {s["median_ms"]:>10.1f} | {s["min_ms"]:>10.1f} | {s["max_ms"]:>10.1f} '
              f'| {s["median_ms"] / full:>6.3f} |')
    floor = stats['qkv+proj only']['median_ms']
    core = (stats['L-squeeze']['median_ms'] - floor) / (full - floor)
    print(f'\n(info) without the shared qkv/proj cost: (L-squeeze - proj) / (F - proj) = {core:.3f} (1/{1 / core:.1f})')
    print_targets(targets)
