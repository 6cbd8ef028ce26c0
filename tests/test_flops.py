"""FLOP counter (jetvit_mm/benchmark/flops.py) against hand-computed values, the peak-memory probe and the CPU
benchmarks' allocator policy (the benchmarks themselves: test_benchmark.py)."""
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from jetvit_mm.benchmark import FlopCounter, count_flops
from jetvit_mm.benchmark.allocator import apply_policy
from jetvit_mm.benchmark.flops import full_attention_flops, linear_attention_flops, window_attention_flops
from jetvit_mm.benchmark.memory import forward_memory
from jetvit_mm.models.jetvit import JetViT
from jetvit_mm.models.mixers import build_mixer, default_mixers

# tiny DINOv3-style model: width 32, 2 heads (head_dim 16), MLP 128, 5 prefix tokens; 96x96 input = 6x6 patches
TINY = dict(model_name='dinov3_vits16', depth=3, embed_dim=32, num_heads=2)
N = 5 + 36  # tokens
# hand-computed, 2 FLOPs per multiply-accumulate
QKV, PROJ = 2 * N * 32 * 96, 2 * N * 32 * 32  # 251904, 83968
MLP = 2 * (2 * N * 32 * 128)  # 671744
PATCH_EMBED = 2 * 32 * 36 * (3 * 16 * 16)  # 1769472
F_CORE = 4 * N * N * 32  # 215168
# window 4 on the 6x6 grid: 2x2 padded windows of 16 patches, each seeing 16 + 5 keys; 5 prefix queries see all 41
W_CORE = 4 * 32 * (4 * 16 * (5 + 16) + 5 * N)  # 198272
L_CORE = 4 * N * 32 * 16 + 2 * N * 32  # 86592
# squeeze conv: generator Linear(32, 4) and Linear(4, 32 * 9) on one pooled vector, then a 3x3 depthwise conv
L_CONV = 2 * 32 * 4 + 2 * 4 * 288 + 2 * 32 * 36 * 9  # 23296


@pytest.fixture(scope='module')
def tiny_fwl():
    torch.manual_seed(0)
    return JetViT(arch='FWL', mixers=default_mixers(W=dict(window_size=4)), **TINY).eval()


@pytest.mark.parametrize('letter, core, conv', [('F', F_CORE, 0), ('W', W_CORE, 0), ('L', L_CORE, L_CONV)])
def test_each_mixer_matches_hand_count(letter, core, conv):
    mixer = build_mixer(letter, dim=32, num_heads=2, num_prefix_tokens=5,
                        mixers=default_mixers(W=dict(window_size=4))).eval()
    with torch.no_grad(), FlopCounter(mixer) as counter:
        mixer(torch.randn(1, N, 32), (6, 6))
    modules = counter.summary()['modules']
    assert modules['qkv'] == QKV and modules['proj'] == PROJ
    assert modules['.<attention>'] == core
    assert sum(v for k, v in modules.items() if 'conv' in k) == conv
    assert counter.summary()['total'] == QKV + PROJ + core + conv


def test_model_count_per_layer_and_total(tiny_fwl):
    result = count_flops(tiny_fwl, (96, 96))
    layers = result['layers']
    assert [row['mixer'] for row in layers] == ['F', 'W', 'L']
    assert [row['attention'] for row in layers] == [F_CORE, W_CORE, L_CORE]
    assert [row['conv'] for row in layers] == [0, 0, L_CONV]
    assert all(row['qkv_proj'] == QKV + PROJ and row['mlp'] == MLP and row['other'] == 0 for row in layers)
    assert result['by_part']['patch_embed'] == PATCH_EMBED
    expected = PATCH_EMBED + 3 * (QKV + PROJ + MLP) + F_CORE + W_CORE + L_CORE + L_CONV
    assert result['total'] == expected == 5_315_648
    assert result['input_shape'] == [1, 3, 96, 96]
    assert count_flops(tiny_fwl, (96, 96), batch_size=2)['total'] == 2 * expected
    assert count_flops(tiny_fwl, (96, 96), fake=False)['total'] == expected  # shapes-only run == real run


def test_model_count_equals_torch_counter_with_math_attention(tiny_fwl):
    """torch's own counter sees the attention matmuls only when SDPA runs its math path: then both agree."""
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as torch_counter:
        tiny_fwl(torch.zeros(1, 3, 96, 96))
    assert torch_counter.get_total_flops() == count_flops(tiny_fwl, (96, 96))['total']


@pytest.mark.parametrize('letter', ['F', 'L', 'W'])
def test_attention_term_scaling(letter):
    """4x the patches: F's attention term grows with the square of the tokens, L's and W's linearly."""
    model = JetViT(arch=letter * 1, mixers=default_mixers(W=dict(window_size=4)), **dict(TINY, depth=1)).eval()
    small, large = (count_flops(model, (16 * s, 16 * 2 * s))['layers'][0] for s in (8, 16))
    n_small, n_large = 5 + 8 * 16, 5 + 16 * 32
    ratio = large['attention'] / small['attention']
    if letter == 'F':
        assert small['attention'] == full_attention_flops(1, n_small, 32)
        assert ratio == pytest.approx((n_large / n_small) ** 2) and ratio > 14
    elif letter == 'L':
        assert small['attention'] == linear_attention_flops(1, n_small, 32, 2)
        assert ratio == pytest.approx(n_large / n_small) and ratio < 4
        assert large['conv'] == 4 * small['conv'] - 3 * (2 * 32 * 4 + 2 * 4 * 288)  # conv on patches, generator fixed
    else:
        assert small['attention'] == window_attention_flops(1, (8, 16), 4, 5, 32)
        assert ratio < 4.2
    assert large['qkv_proj'] / small['qkv_proj'] == pytest.approx(n_large / n_small)


def test_supernet_counts_only_the_active_path(tiny_fwl):
    from jetvit_mm.models.supernet import JetViTSupernet

    supernet = JetViTSupernet(search_space='LWF', arch='FWL',
                              mixers=default_mixers(W=dict(window_size=4)), **TINY).eval()
    assert count_flops(supernet, (96, 96))['total'] == count_flops(tiny_fwl, (96, 96))['total']


def test_forward_memory_probe_in_process():
    result = forward_memory({'model': dict(arch='LWF', mixers=default_mixers(W=dict(window_size=4)), **TINY),
                             'input_shape': [1, 3, 64, 64],
                             'threads': 1})
    assert result['peak_increase_bytes'] >= 0 and result['weights_bytes'] > 0
    assert result['method'] in ('VmHWM after clear_refs', 'ru_maxrss (upper bound)')


FAULTS_SCRIPT = '''
import resource, sys, torch
from jetvit_mm.benchmark.allocator import apply_policy
from jetvit_mm.models.mixers import default_mixers
applied = apply_policy(sys.argv[1], 'cpu')
x = torch.ones(12 * 2 ** 20)  # 48 MiB: above glibc's largest automatic mmap threshold (32 MiB)
def faults():  # minor page faults of a forward-like chain of 48 MiB temporaries
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    y = (x * 2 + 1).relu() * x
    del y
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(applied, *[faults() for _ in range(16)])
'''


@pytest.mark.skipif(platform.libc_ver()[0] != 'glibc', reason='the allocator policy is a glibc mallopt setting')
@pytest.mark.integration
def test_keep_freed_memory_stops_page_faults_of_repeated_big_allocations(tmp_path):
    """The CPU benchmarks' default allocator policy: a big tensor freed and allocated again is not mapped (and
    page-faulted) afresh; the system policy maps it every time."""
    runs = {}
    for policy in ('keep', 'system'):
        proc = subprocess.run([sys.executable, '-c', FAULTS_SCRIPT, policy], capture_output=True, text=True,
                              check=True)
        applied, *faults = proc.stdout.split()
        warm = [int(f) for f in faults[2:]]  # after the first rounds (the heap grows to its working size)
        runs[policy] = (applied == 'True', statistics.median(warm), statistics.mean(warm), min(warm))
    assert runs['keep'][0] and not runs['system'][0]
    # once warm, most rounds under keep fault not at all (now and then one temporary lands on fresh pages: 48 MiB =
    # 12288 pages of 4 KiB), every round under the system policy faults all of them in
    assert runs['keep'][1] < 64, runs
    assert runs['system'][3] > 10 * max(runs['keep'][2], 1), runs
    with pytest.raises(ValueError, match='choose one of keep, system'):
        apply_policy('jemalloc', 'cpu')
    assert apply_policy('keep', 'cuda') is False  # CUDA timings keep the system policy
    # the tool's default, recorded with the result
    out = tmp_path / 'mixers.json'
    tool = Path(__file__).resolve().parents[1] / 'tools' / 'benchmark.py'
    subprocess.run([sys.executable, str(tool), 'mixers', '--grid', '4', '6', '--dim', '32', '--heads', '2',
                    '--window', '3', '--warmup', '0', '--repeat', '1', '--json', str(out)], check=True,
                   capture_output=True)
    assert json.loads(out.read_text())['malloc'] == {'policy': 'keep', 'applied': True, 'device': 'cpu'}
