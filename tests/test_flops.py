"""FLOP counter (jetvit_mm/benchmark/flops.py) against hand-computed values, and the `models` benchmark at toy size."""
import importlib.util
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
from jetvit_mm.models.mixers import build_mixer

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
    return JetViT(arch='FWL', window_size=4, **TINY).eval()


@pytest.mark.parametrize('letter, core, conv', [('F', F_CORE, 0), ('W', W_CORE, 0), ('L', L_CORE, L_CONV)])
def test_each_mixer_matches_hand_count(letter, core, conv):
    mixer = build_mixer(letter, dim=32, num_heads=2, num_prefix_tokens=5, window_size=4).eval()
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
    model = JetViT(arch=letter * 1, window_size=4, **dict(TINY, depth=1)).eval()
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

    supernet = JetViTSupernet(search_space='LWF', arch='FWL', window_size=4, **TINY).eval()
    assert count_flops(supernet, (96, 96))['total'] == count_flops(tiny_fwl, (96, 96))['total']


def test_forward_memory_probe_in_process():
    result = forward_memory({'model': dict(arch='LWF', window_size=4, **TINY), 'input_shape': [1, 3, 64, 64],
                             'threads': 1})
    assert result['peak_increase_bytes'] >= 0 and result['weights_bytes'] > 0
    assert result['method'] in ('VmHWM after clear_refs', 'ru_maxrss (upper bound)')


def test_models_benchmark_at_toy_size(tmp_path, monkeypatch):
    path = Path(__file__).resolve().parents[1] / 'tools' / 'benchmark.py'
    spec = importlib.util.spec_from_file_location('jetvit_benchmark_tool_models', path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    rounds = []  # the names each round-robin timing interleaves
    timed = tool.time_interleaved
    monkeypatch.setattr(tool, 'time_interleaved', lambda calls, *a: rounds.append(list(calls)) or timed(calls, *a))
    assert tool.resolve_arch('2F', 12) == 'LWLLWWLLWFLF' and tool.resolve_arch('all-W', 3) == 'WWW'
    with pytest.raises(ValueError, match='shortcut'):
        tool.resolve_arch('LXL', 3)
    config = tmp_path / 'tiny.py'
    config.write_text(f'model = dict(backbone=dict(type="JetViT", frozen=True, window_size=2, **{TINY!r}))\n')
    out, png = tmp_path / 'models.json', tmp_path / 'scaling.png'
    result = tool.main(['models', '--config', str(config), '--arch', 'all-L', '--arch', 'LWF', '--size', '32', '64',
                        '--size', '64', '128', '--warmup', '0', '--repeat', '2', '--no-memory', '--json', str(out),
                        '--plot', str(png), '--threads', '1', '--malloc', 'system'])
    assert out.is_file() and png.is_file() and png.stat().st_size > 0
    assert [e['label'] for e in result['entries']] == ['teacher', 'all-L', 'LWF']  # teacher added as reference
    # one round-robin over every (size, arch): the growth between sizes is timed side by side too
    assert rounds == [[f'{size} {label}' for size in ('32x64', '64x128') for label in ('teacher', 'all-L', 'LWF')]]
    assert result['malloc'] == {'policy': 'system', 'applied': False, 'device': 'cpu'}
    assert len(result['rows']) == 6
    for row in result['rows']:
        assert row['images_per_s'] > 0 and row['gflops'] > 0
        assert row['speedup'] == pytest.approx(
            next(r['median_ms'] for r in result['rows'] if r['size'] == row['size'] and r['label'] == 'teacher')
            / row['median_ms'])
    assert all(len(s) == 2 for per_size in result['samples_ms'].values() for s in per_size.values())


def test_models_benchmark_linear_cfg_plot_and_cuda_graph_checks(tmp_path):
    path = Path(__file__).resolve().parents[1] / 'tools' / 'benchmark.py'
    spec = importlib.util.spec_from_file_location('jetvit_benchmark_tool_models_cfg', path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.key_value('precision=mixed') == {'precision': 'mixed'}
    assert tool.key_value('kernel_size=5') == {'kernel_size': 5}
    assert tool.key_value('focusing=None') == {'focusing': None}
    with pytest.raises(SystemExit):  # argparse: 'expected KEY=VALUE'
        tool.parse_args(['models', '--linear-cfg', 'mixed'])
    with pytest.raises(SystemExit, match='--cuda-graph needs --device cuda'):
        tool.main(['models', '--cuda-graph', '--size', '32', '64'])
    config = tmp_path / 'tiny.py'
    config.write_text(f'model = dict(backbone=dict(type="JetViT", window_size=2, **{TINY!r}))\n')
    out, png = tmp_path / 'models.json', tmp_path / 'scaling.png'
    common = ['models', '--config', str(config), '--arch', 'LWF', '--size', '32', '64', '--warmup', '0', '--repeat',
              '1', '--no-memory', '--threads', '1', '--malloc', 'system']
    result = tool.main(common + ['--json', str(out), '--linear-cfg', 'precision=mixed', '--linear-cfg', 'conv=static'])
    assert result['entries'][-1]['kwargs']['linear_cfg'] == {'precision': 'mixed', 'conv': 'static'}
    tool.main(['plot', str(out), '--out', str(png)])
    assert png.is_file() and png.stat().st_size > 0
    with pytest.raises(ValueError, match="unknown precision 'half'"):
        tool.main(common + ['--linear-cfg', 'precision=half'])


def test_models_benchmark_of_the_depth_model_with_its_dpt_head(tmp_path):
    """``--head dpt``: the whole JetViT-DepthAnything is timed (backbone + DPT head, the paper's Table 4 model), with
    the config's head widths; the head's FLOPs equal torch's own count of its convolutions; the default sizes follow
    the patch size (14 here); a model without a DPT preset is refused with the valid choices."""
    from jetvit_mm.models.depth_anything import JetViTDepthAnything

    path = Path(__file__).resolve().parents[1] / 'tools' / 'benchmark.py'
    spec = importlib.util.spec_from_file_location('jetvit_benchmark_tool_models_dpt', path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    config = Path(__file__).resolve().parents[1] / 'configs' / 'tiny' / 'depth_eval_tiny_nyu.py'
    common = ['models', '--config', str(config), '--arch', 'LWLF', '--warmup', '0', '--repeat', '1', '--threads', '1',
              '--head', 'dpt']
    # with the memory probes (fresh processes build the head too) and the per-block profile
    result = tool.main(common + ['--size', '56', '70', '--profile'])
    head = {'features': 16, 'out_channels': [8, 16, 32, 32]}  # the tiny config's decode_head
    assert [(e['label'], e['head']) for e in result['entries']] == [('teacher', head), ('LWLF', head)]
    kwargs = dict(result['entries'][1]['kwargs'])
    torch.manual_seed(0)
    model = JetViTDepthAnything(**kwargs, **head).eval()
    for e in result['entries']:  # the memory probes built the whole depth model, head included
        built = JetViTDepthAnything(**e['kwargs'], **e['head'])
        weights = sum(t.numel() * t.element_size() for t in [*built.parameters(), *built.buffers()])
        assert next(r for r in result['rows'] if r['label'] == e['label'])['memory']['weights_bytes'] == weights
    assert len(result['profiles']['LWLF']['block_ms']) == 4 and set(result['profiles']['LWLF']
                                                                    ['mean_block_ms_by_mixer']) == {'F', 'L', 'W'}
    with torch.no_grad():
        features = model.backbone.forward_intermediates(torch.zeros(1, 3, 56, 70), norm=True, output_fmt='NCHW')
        with FlopCounterMode(display=False) as torch_count:
            model.depth_head(features)
    for row in result['rows']:
        assert row['gflops_by_part']['head'] * 1e9 == pytest.approx(torch_count.get_total_flops(), rel=1e-9)
        assert row['peak_increase_mib'] > 0 and row['images_per_s'] > 0
    backbone_only = count_flops(model.backbone, (56, 70))
    lwlf = next(r for r in result['rows'] if r['label'] == 'LWLF')
    assert lwlf['gflops'] * 1e9 == pytest.approx(backbone_only['total'] + torch_count.get_total_flops(), rel=1e-9)
    whole = count_flops(model, (56, 70))  # the backbone's parts keep their names under ``backbone.``
    assert whole['by_part'] == dict(backbone_only['by_part'], head=torch_count.get_total_flops())
    assert whole['layers'] == backbone_only['layers'] and [r['mixer'] for r in whole['layers']] == list('LWLF')
    assert lwlf['gflops_by_part']['head'] > 0.5 * lwlf['gflops']  # at this width the head dominates

    defaults = tool.main(common + ['--no-memory'])
    assert sorted({r['size'] for r in defaults['rows']}) == ['448x896', '896x1792']  # 32 x 64 and 64 x 128 patches
    with pytest.raises(ValueError, match=r"no DPT preset for 'dinov3_vits16'; valid: vits, vitb, vitl, vitg"):
        tool.main(['models', '--model', 'dinov3_vits16', '--head', 'dpt', '--size', '32', '64', '--no-memory'])
    # a config's own head widths need no preset (as DPTDepthHead); a preset alone gives its widths
    config = tmp_path / 'dpt.py'
    config.write_text("model = dict(backbone=dict(type='JetViT', model_name='dinov3_vits16'), "
                      "decode_head=dict(type='DPTDepthHead', features=16, out_channels=[8, 16, 32, 32]))\n")
    args = tool.parse_args(['models', '--config', str(config), '--head', 'dpt'])
    assert tool.head_from_args(args, 'dinov3_vits16') == head
    config.write_text("model = dict(backbone=dict(type='JetViT'), "
                      "decode_head=dict(type='DPTDepthHead', preset='vitb'))\n")
    args = tool.parse_args(['models', '--config', str(config), '--head', 'dpt'])
    assert tool.head_from_args(args, 'dinov3_vits16') == {'features': 128, 'out_channels': [96, 192, 384, 768]}


FAULTS_SCRIPT = '''
import resource, sys, torch
from jetvit_mm.benchmark.allocator import apply_policy
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
