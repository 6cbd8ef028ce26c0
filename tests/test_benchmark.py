"""The benchmarks at toy size: the mixer and whole-model benchmarks of jetvit_mm/benchmark in process, their
documented targets and arch shortcuts, and tools/benchmark.py as a user runs it (CLI, JSON, plot, errors)."""
import contextlib
import json
import statistics

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import jetvit_mm.benchmark.models as model_bench
from jetvit_mm.benchmark import count_flops
from jetvit_mm.benchmark.archs import resolve_arch, two_full_arch
from jetvit_mm.benchmark.mixers import benchmark_mixers, mixer_block
from jetvit_mm.benchmark.models import (
    baseline_entries,
    benchmark_models,
    default_sizes,
    dpt_widths,
    jetvit_kwargs,
    model_entries,
)
from jetvit_mm.benchmark.targets import baseline_targets, distill_step_target, mixer_targets, model_targets
from jetvit_mm.models.mixers import DEFAULT_MIXERS, build_mixer, default_mixers

from .conftest import REPO, run_tool

TINY = dict(model_name='dinov3_vits16', depth=3, embed_dim=32, num_heads=2)
TINY_DEPTH_CONFIG = REPO / 'tests' / 'configs' / 'depth_eval_tiny_nyu.py'
QUICK = dict(warmup=0, repeat=2, batch=1, dtype='fp32', device='cpu', compile_model=False, cuda_graph=False,
             throughput=None, threads=1, malloc='system', malloc_kept=False)


# ----------------------------------------------------------------------------------------------------- in process

def test_mixer_benchmark_times_every_entry_interleaved():
    result = benchmark_mixers(grid=(4, 6), dim=32, heads=2, batch=1, prefix=5, window=3, warmup=0, repeat=2,
                              dtype='fp32', device='cpu', rope=True, cuda_graph=False, malloc='system',
                              malloc_kept=False)
    assert set(result['stats']) >= {'qkv+proj only', 'F', 'W3', 'L-none', 'L-static', 'L-squeeze', 'L-token',
                                    'L-squeeze focus3', 'block L-static', 'block L-squeeze'}
    assert 'L-squeeze mixed' not in result['stats']  # in fp32 the same computation as L-squeeze
    assert all(len(samples) == 2 for samples in result['samples_ms'].values())
    assert [t['target'] for t in result['targets']] == [t['target'] for t in mixer_targets(result['stats'])]
    assert result['malloc'] == {'policy': 'system', 'applied': False, 'device': 'cpu'}


def test_mixer_block_is_a_pre_norm_block_without_layerscale():
    torch.manual_seed(0)
    mixer = build_mixer('L', dim=32, num_heads=2, num_prefix_tokens=5)
    block = mixer_block(32, mixer).eval()
    x, grid = torch.randn(2, 5 + 12, 32), (3, 4)
    with torch.no_grad():
        y = x + mixer(torch.nn.functional.layer_norm(x, (32,), block.norm1.weight, block.norm1.bias, 1e-5), grid)
        y = y + block.mlp(torch.nn.functional.layer_norm(y, (32,), block.norm2.weight, block.norm2.bias, 1e-5))
        assert torch.equal(block(x, grid), y)
    assert block.mlp.fc1.out_features == 4 * 32


def stats_of(**medians: float) -> dict:
    return {name: {'median_ms': ms, 'min_ms': ms} for name, ms in medians.items()}


def test_mixer_targets_at_their_thresholds():
    met = mixer_targets(stats_of(**{'L-squeeze': 1., 'F': 20., 'block L-squeeze': 1.04, 'block L-static': 1.,
                                    'L-token': 1.1, 'L-static': 1.}))
    assert [t['met'] for t in met] == [True, True, True]
    missed = mixer_targets(stats_of(**{'L-squeeze': 1., 'F': 19., 'block L-squeeze': 1.06, 'block L-static': 1.,
                                       'L-token': 1.09, 'L-static': 1.}))
    assert [t['met'] for t in missed] == [False, False, False]
    fast = mixer_targets(stats_of(**{'L-squeeze': 1., 'F': 20., 'block L-squeeze': 1.04, 'block L-static': 1.,
                                     'L-token': 1.1, 'L-static': 1., 'L-squeeze auto': 2.4, 'W16 compile': 3.41}))
    assert [(t['target'].split(' <=')[0], t['met']) for t in fast[:2]] == [('L-squeeze auto', True),
                                                                         ('W16 compile', False)]
    assert missed[0]['value'] == '0.053 (1/19.0)' and missed[1]['value'] == '+6.0%'
    assert distill_step_target(1.25)['met'] and not distill_step_target(1.26)['met']


def model_row(size: str, label: str, median: float, speedup=None, memory=None) -> dict:
    row = {'size': size, 'label': label, 'median_ms': median, 'min_ms': median, 'speedup': speedup,
           'speedup_min': speedup}
    if memory is not None:
        row.update(memory={}, peak_increase_mib=memory)
    return row


def test_model_targets_for_what_was_measured():
    rows = [model_row('512x1024', 'teacher', 10.), model_row('512x1024', 'all-L', 5.),
            model_row('1024x2048', 'teacher', 41., 1., memory=100.), model_row('1024x2048', '2F', 21., 1.95, 98.),
            model_row('1024x2048', 'all-L', 23., 2.4)]
    verdicts = {t['target']: t['met'] for t in model_targets(rows)}
    assert verdicts == {
        '2F >= 1.9x faster than the teacher at 1024x2048': True,
        'all-L >= 2.5x faster than the teacher at 1024x2048': False,
        'all-L latency growth 512x1024 -> 1024x2048 (4x tokens) at most 4.5x': False,  # x4.6
        'teacher latency growth 512x1024 -> 1024x2048 (4x tokens) super-linear (> 4x)': True,  # x4.1
        '2F peak forward memory below the teacher\'s at 1024x2048 (by more than 1%: page-level noise is not a '
        'saving)': True,  # -2 %
    }
    assert model_targets(rows[:2]) == []  # nothing at 1024x2048: no verdicts
    fast = {t['target']: t['met'] for t in model_targets(rows, ('cpu', 'bf16', True))}
    assert {k: v for k, v in fast.items() if k not in verdicts} == {
        '2F >= 2.8x faster than the teacher at 1024x2048 (cpu bf16, compiled)': False,
        'all-L >= 4.5x faster than the teacher at 1024x2048 (cpu bf16, compiled)': False,
    }
    assert len(model_targets(rows, ('cpu', 'fp16', False))) == len(verdicts)  # a mode without fast-path targets


def test_arch_shortcuts():
    assert resolve_arch('2F', 12) == 'LWLLWWLLWFLF' and resolve_arch('teacher', 3) == 'FFF'
    assert resolve_arch('all-W', 3) == 'WWW' and resolve_arch('all-L', 2) == 'LL' and resolve_arch('LWF', 3) == 'LWF'
    assert two_full_arch(24) == 'LWLLWWLWLLWWLWFLWWLWLLFW'  # F at layers 14 and 22: the paper's DINOv3-L placement
    with pytest.raises(ValueError, match='shortcut: teacher, 2F, all-L, all-W'):
        resolve_arch('LXL', 3)


def test_model_entries():
    kwargs = jetvit_kwargs({'mixers': default_mixers(W=dict(window_size=2)), **TINY}, 'dinov3_vitb16', window=4,
                           linear_options=[{'precision': 'mixed'}, {'conv': 'static'}], window_kernel='torch')
    assert kwargs['model_name'] == 'dinov3_vits16'
    assert kwargs['mixers'] == default_mixers(W=dict(window_size=4, kernel='torch'),
                                              L=dict(precision='mixed', conv='static'))
    assert 'mixers' not in jetvit_kwargs(TINY, 'unused')  # nothing over the model's own table
    entries = model_entries(kwargs, ['all-L', 'LWF', 'all-L'])
    assert [(e['label'], e['arch']) for e in entries] == [('teacher', 'FFF'), ('all-L', 'LLL'), ('LWF', 'LWF')]
    entries = model_entries(kwargs, ['LWF', 'teacher'], checkpoint='hybrid.pth')
    assert [e['label'] for e in entries] == ['LWF', 'teacher']
    assert entries[0]['kwargs']['checkpoint'] == 'hybrid.pth' and 'checkpoint' not in entries[1]['kwargs']
    assert [e['label'] for e in model_entries(kwargs, ['LWF'], add_teacher=False)] == ['LWF']
    with pytest.raises(ValueError, match='exactly one non-teacher'):
        model_entries(kwargs, ['all-L', 'LWF'], checkpoint='hybrid.pth')
    assert dpt_widths({'features': 16, 'out_channels': [8, 16, 32, 32]}, 'dinov3_vits16') == {
        'features': 16, 'out_channels': [8, 16, 32, 32]}
    assert dpt_widths({'preset': 'vitb'}, 'dinov3_vits16') == {'features': 128, 'out_channels': [96, 192, 384, 768]}
    with pytest.raises(ValueError, match=r"no DPT preset for 'dinov3_vits16'; valid: vits, vitb, vitl, vitg"):
        dpt_widths(None, 'dinov3_vits16')


def test_models_benchmark_interleaves_every_size_and_arch(monkeypatch):
    rounds = []  # the names each round-robin timing interleaves
    timed = model_bench.time_interleaved
    monkeypatch.setattr(model_bench, 'time_interleaved',
                        lambda calls, *a, **k: rounds.append(list(calls)) or timed(calls, *a, **k))
    entries = model_entries(jetvit_kwargs(TINY, 'unused', window=2), ['all-L', 'LWF'])
    result = benchmark_models(entries, sizes=[(32, 64), (64, 128)], memory=False, profile=False, **QUICK)
    assert [e['label'] for e in result['entries']] == ['teacher', 'all-L', 'LWF']  # teacher added as reference
    # one round-robin over every (size, arch): the growth between sizes is timed side by side too
    assert rounds == [[f'{size} {label}' for size in ('32x64', '64x128') for label in ('teacher', 'all-L', 'LWF')]]
    assert result['malloc'] == {'policy': 'system', 'applied': False, 'device': 'cpu'}
    assert len(result['rows']) == 6
    for row in result['rows']:
        assert row['images_per_s'] > 0 and row['gflops'] > 0
        teacher = next(r for r in result['rows'] if r['size'] == row['size'] and r['label'] == 'teacher')
        assert row['speedup'] == pytest.approx(teacher['median_ms'] / row['median_ms'])
        samples = result['samples_ms'][row['size']][row['label']]
        assert len(samples) == 2 and row['median_ms'] == statistics.median(samples)


@pytest.mark.parametrize('fails', [False, True])
def test_freeze_is_on_while_the_benchmark_runs_and_restored_after(fails):
    """``freeze=True`` switches inductor's process-wide ``freezing`` on for the benchmark only: on while it times,
    back to what it was when it returns or raises."""
    import torch._inductor.config as inductor_config

    seen = []

    def on_round(*args) -> None:
        seen.append(inductor_config.freezing)
        if fails:
            raise RuntimeError('stopped mid-benchmark')

    kwargs = jetvit_kwargs({**TINY, 'mixers': default_mixers(W=dict(window_size=2))}, 'unused')
    entries = model_entries(kwargs, ['LWF'], add_teacher=False)
    with inductor_config.patch(freezing=False):  # the process's setting, whatever an earlier test left
        with pytest.raises(RuntimeError, match='stopped') if fails else contextlib.nullcontext():
            benchmark_models(entries, sizes=[(32, 32)], memory=False, profile=False, on_round=on_round,
                             freeze=True, **QUICK)
        assert seen and all(seen), 'freezing was not on while the models ran'
        assert inductor_config.freezing is False, 'the benchmark left inductor freezing switched on'


def test_models_benchmark_times_the_token_clustering_baseline_beside_the_archs(monkeypatch):
    """``--baseline``'s entries: the teacher with token clustering, in the same round-robin, with its speed-up over
    the teacher (never over itself, though it has the teacher's arch) and its FLOPs on the tokens it runs."""
    rounds = []
    timed = model_bench.time_interleaved
    monkeypatch.setattr(model_bench, 'time_interleaved',
                        lambda calls, *a, **k: rounds.append(list(calls)) or timed(calls, *a, **k))
    kwargs = jetvit_kwargs(TINY, 'unused', window=2)
    entries = model_entries(kwargs, ['all-L'])
    entries += baseline_entries(kwargs, [('tc', 'f2@0'), ('tc-late', 'f2@1')], [e['label'] for e in entries])
    result = benchmark_models(entries, sizes=[(64, 96)], memory=False, profile=True, **QUICK)
    assert rounds == [[f'64x96 {label}' for label in ('teacher', 'all-L', 'tc', 'tc-late')]]
    rows = {r['label']: r for r in result['rows']}
    assert rows['tc']['arch'] == rows['teacher']['arch'] == 'FFF' and rows['tc']['baseline'] == 'f2@0'
    assert rows['teacher']['baseline'] is None and rows['teacher']['speedup'] == 1.0
    for label in ('tc', 'tc-late'):
        assert rows[label]['speedup'] == pytest.approx(rows['teacher']['median_ms'] / rows[label]['median_ms'])
    # FLOPs on the tokens each block sees: fewer with more blocks on the clusters
    assert rows['tc']['gflops'] < rows['tc-late']['gflops'] < rows['teacher']['gflops']
    assert result['entries'][2]['kwargs']['clustering'] == 'f2@0'
    assert len(result['profiles']['tc']['block_ms']) == 3


def test_baseline_entries_refuse_bad_names_and_strengths():
    kwargs = jetvit_kwargs(TINY, 'unused')
    with pytest.raises(ValueError, match="--baseline teacher=f2@0: the name must be non-empty and not another "
                                         "entry's label \\(in use: teacher"):
        baseline_entries(kwargs, [('teacher', 'f2@0')], ['teacher'])
    with pytest.raises(ValueError, match='after=2: must be a block index in 0..1 of this 3-layer model'):
        baseline_entries(kwargs, [('tc', 'f2@2')], ['teacher'])


DPT_HEAD = {'features': 16, 'out_channels': [8, 16, 32, 32]}
DPT_BACKBONE = dict(model_name='dinov2_vits14', embed_dim=32, depth=4, num_heads=2, out_indices=(0, 1, 2, 3),
                    mixers=default_mixers(W=dict(window_size=2)))


def test_models_benchmark_of_the_depth_model_with_its_dpt_head():
    """The whole JetViT-DepthAnything (backbone + DPT head, the paper's Table 4 model): the profile covers every
    block, the head's FLOPs equal torch's own count of its convolutions, and the default sizes follow the patch size
    (14 here)."""
    from jetvit_mm.models.depth_anything import JetViTDepthAnything

    entries = model_entries(DPT_BACKBONE, ['LWLF'], head=DPT_HEAD)
    result = benchmark_models(entries, sizes=[(56, 70)], memory=False, profile=True, **QUICK)
    assert [(e['label'], e['head']) for e in result['entries']] == [('teacher', DPT_HEAD), ('LWLF', DPT_HEAD)]
    assert len(result['profiles']['LWLF']['block_ms']) == 4
    assert set(result['profiles']['LWLF']['mean_block_ms_by_mixer']) == {'F', 'L', 'W'}
    model = JetViTDepthAnything(**entries[1]['kwargs'], **DPT_HEAD).eval()
    with torch.no_grad():
        features = model.backbone.forward_intermediates(torch.zeros(1, 3, 56, 70), norm=True, output_fmt='NCHW')
        with FlopCounterMode(display=False) as torch_count:
            model.depth_head(features)
    for row in result['rows']:
        assert row['gflops_by_part']['head'] * 1e9 == pytest.approx(torch_count.get_total_flops(), rel=1e-9)
        assert row['images_per_s'] > 0
    backbone_only = count_flops(model.backbone, (56, 70))
    lwlf = next(r for r in result['rows'] if r['label'] == 'LWLF')
    assert lwlf['gflops'] * 1e9 == pytest.approx(backbone_only['total'] + torch_count.get_total_flops(), rel=1e-9)
    whole = count_flops(model, (56, 70))  # the backbone's parts keep their names under ``backbone.``
    assert whole['by_part'] == dict(backbone_only['by_part'], head=torch_count.get_total_flops())
    assert whole['layers'] == backbone_only['layers'] and [r['mixer'] for r in whole['layers']] == list('LWLF')
    assert lwlf['gflops_by_part']['head'] > 0.5 * lwlf['gflops']  # at this width the head dominates


def test_default_sizes_follow_the_patch_size(monkeypatch):
    assert default_sizes(16) == [(512, 1024), (1024, 2048)] and default_sizes(14) == [(448, 896), (896, 1792)]
    asked = []
    monkeypatch.setattr(model_bench, 'default_sizes', lambda patch: asked.append(patch) or [(2 * patch, 3 * patch)])
    result = benchmark_models(model_entries(DPT_BACKBONE, ['LWLF'], head=DPT_HEAD, add_teacher=False), sizes=None,
                              memory=False, profile=False, **dict(QUICK, repeat=1))
    assert asked == [14] and [r['size'] for r in result['rows']] == ['28x42']


@pytest.mark.integration  # a fresh process per (arch, size)
def test_models_benchmark_memory_probes_build_the_whole_depth_model():
    from jetvit_mm.models.depth_anything import JetViTDepthAnything

    entries = model_entries(DPT_BACKBONE, ['LWLF'], head=DPT_HEAD)
    result = benchmark_models(entries, sizes=[(56, 70)], memory=True, profile=False, **dict(QUICK, repeat=1))
    for e in result['entries']:  # the memory probes built the whole depth model, head included
        built = JetViTDepthAnything(**e['kwargs'], **e['head'])
        weights = sum(t.numel() * t.element_size() for t in [*built.parameters(), *built.buffers()])
        row = next(r for r in result['rows'] if r['label'] == e['label'])
        assert row['memory']['weights_bytes'] == weights and row['peak_increase_mib'] > 0


# ----------------------------------------------------------------------------------------------- the tool itself

def benchmark_tool(*args, check: bool = True):
    return run_tool('benchmark.py', *args, check=check, env={'OMP_NUM_THREADS': '1'})


@pytest.mark.integration
def test_tool_mixers_writes_its_json(tmp_path):
    out = tmp_path / 'mixers.json'
    proc = benchmark_tool('mixers', '--grid', '4', '6', '--dim', '32', '--heads', '2', '--window', '3', '--warmup',
                          '1', '--repeat', '2', '--json', out, '--malloc', 'system')
    result = json.loads(out.read_text())
    assert list(result)[:2] == ['command', 'args'] and result['command'] == 'mixers'
    assert result['args']['grid'] == [4, 6] and result['args']['malloc'] == 'system'
    assert set(result['stats']) >= {'F', 'W3', 'L-none', 'L-static', 'L-squeeze', 'L-token', 'block L-static',
                                    'block L-squeeze', 'L-squeeze auto', 'block L-squeeze auto', 'W3 auto'}
    assert all(len(samples) == 2 for samples in result['samples_ms'].values())
    assert [t['target'].split(' <=')[0] for t in result['targets'][:2]] == ['L-squeeze auto', 'W3 auto']
    assert len(result['targets']) == 5 and result['machine']['threads'] >= 1  # fast paths' L/F, W/F, then three
    assert '  round 1/3 (warmup) done' in proc.stdout and '  round 3/3 done' in proc.stdout
    assert all(f'{"MET " if t["met"] else "MISS"}  {t["target"]}: {t["value"]}' in proc.stdout
               for t in result['targets'])


@pytest.mark.integration
def test_tool_models_from_a_config_with_linear_options_json_and_plots(tmp_path):
    config = tmp_path / 'tiny.py'
    mixers = default_mixers(W=dict(window_size=2))
    config.write_text(f'model = dict(backbone=dict(type="JetViT", frozen=True, mixers={mixers!r}, **{TINY!r}))\n')
    out, png, replot = tmp_path / 'models.json', tmp_path / 'scaling.png', tmp_path / 'replot.png'
    benchmark_tool('models', '--config', config, '--arch', 'all-L', '--arch', 'LWF', '--size', '32', '64', '--size',
                   '64', '128', '--warmup', '0', '--repeat', '2', '--no-memory', '--json', out, '--plot', png,
                   '--threads', '1', '--malloc', 'system', '--linear-cfg', 'precision=mixed', '--linear-cfg',
                   'kernel_size=5', '--linear-cfg', 'focusing=None')
    result = json.loads(out.read_text())
    assert result['command'] == 'models' and [e['label'] for e in result['entries']] == ['teacher', 'all-L', 'LWF']
    assert result['entries'][-1]['kwargs']['mixers']['L'] == dict(DEFAULT_MIXERS['L'], precision='mixed', kernel_size=5,
                                                                  focusing=None)
    assert 'frozen' not in result['entries'][0]['kwargs']  # a config key JetViT's benchmark build does not take
    assert len(result['rows']) == 6 and result['malloc'] == {'policy': 'system', 'applied': False, 'device': 'cpu'}
    assert png.stat().st_size > 0
    benchmark_tool('plot', out, '--out', replot)
    assert replot.stat().st_size > 0


@pytest.mark.integration
def test_tool_models_takes_the_dpt_widths_of_a_config(tmp_path):
    out = tmp_path / 'dpt.json'
    benchmark_tool('models', '--config', TINY_DEPTH_CONFIG, '--arch', 'LWLF', '--head', 'dpt', '--size', '56', '70',
                   '--warmup', '0', '--repeat', '1', '--threads', '1', '--no-memory', '--json', out)
    head = {'features': 16, 'out_channels': [8, 16, 32, 32]}  # the tiny config's decode_head
    assert [(e['label'], e['head']) for e in json.loads(out.read_text())['entries']] == [('teacher', head),
                                                                                       ('LWLF', head)]
    preset = tmp_path / 'preset.py'  # a preset alone gives its widths (as DPTDepthHead)
    preset.write_text("model = dict(backbone=dict(type='JetViT', model_name='dinov2_vits14', embed_dim=32, depth=4, "
                      "num_heads=2, out_indices=(0, 1, 2, 3)), decode_head=dict(type='DPTDepthHead', preset='vitb'))\n")
    benchmark_tool('models', '--config', preset, '--head', 'dpt', '--size', '28', '28', '--warmup', '0', '--repeat',
                   '1', '--threads', '1', '--no-memory', '--no-teacher', '--json', out)
    assert json.loads(out.read_text())['entries'][0]['head'] == {'features': 128, 'out_channels': [96, 192, 384, 768]}


@pytest.mark.integration
def test_tool_models_times_baselines_in_the_same_run(tmp_path):
    out = tmp_path / 'models.json'
    proc = benchmark_tool('models', '--model', 'dinov3_vits16', '--arch', 'all-L', '--baseline', 'tc=f2@1',
                          '--size', '64', '96', '--warmup', '0', '--repeat', '1', '--threads', '1', '--no-memory',
                          '--json', out, '--linear-cfg', 'kernel=torch', '--window', '2')
    result = json.loads(out.read_text())
    assert [(e['label'], e['baseline']) for e in result['entries']] == [('teacher', None), ('all-L', None),
                                                                        ('tc', 'f2@1')]
    tc = next(r for r in result['rows'] if r['label'] == 'tc')
    assert tc['arch'] == 'F' * 12 and tc['speedup'] > 0 and '12F f2@1' in proc.stdout


@pytest.mark.integration
def test_tool_errors_name_the_problem(tmp_path):
    usage = [(['mixers', '--repeat', '0'], '--repeat: expected an integer >= 1, got 0'),
             (['models', '--config', tmp_path / 'nope.py'], 'config file not found'),
             (['plot', tmp_path / 'nope.json', '--out', tmp_path / 'x.png'], 'result file not found'),
             (['models', '--linear-cfg', 'mixed'], "expected KEY=VALUE, got 'mixed'"),
             (['models', '--baseline', 'tome=r0.5@L2'], "expected NAME=f<FACTOR>@<AFTER>[-<UNTIL>]"),
             (['models', '--baseline', 'f2@3'], "expected NAME=f<FACTOR>@<AFTER>")]
    if not torch.cuda.is_available():
        usage.append((['mixers', '--device', 'cuda'], '--device cuda: no CUDA device is available here'))
    for argv, message in usage:
        proc = benchmark_tool(*argv, check=False)
        assert proc.returncode == 2 and message in proc.stderr, (argv, proc.stderr[-2000:])
    tiny = ['--model', 'dinov3_vits16', '--size', '32', '64', '--no-memory', '--warmup', '0', '--repeat', '1']
    failures = [(['models', '--cuda-graph', '--size', '32', '64'], '--cuda-graph needs --device cuda'),
                (['models', *tiny, '--linear-cfg', 'precision=half'], "unknown precision 'half'"),
                (['models', *tiny, '--head', 'dpt'], "no DPT preset for 'dinov3_vits16'; valid: vits, vitb"),
                (['models', *tiny, '--baseline', 'tc=f2@12'], 'after=12: must be a block index in 0..10')]
    for argv, message in failures:
        proc = benchmark_tool(*argv, check=False)
        assert proc.returncode != 0 and message in proc.stderr, (argv, proc.stderr[-2000:])


def test_baseline_targets_take_each_hybrid_at_its_fastest_against_each_teacher():
    """Issue 39's targets on the device check's baselines: 2F >= x2.2 / all-L >= x2.9 against the eager teacher and
    >= x1.9 / >= x2.4 against the compiled one, the hybrid's best run counted; unmeasured rows give no verdict."""
    def row(label, run, eager, compiled=None, size='1024x2048'):
        r = dict(size=size, label=label, run=run, median_ms=1.0, x_vs_eager_teacher=eager)
        return r if compiled is None else dict(r, x_vs_compiled_teacher=compiled)
    rows = [row('2F', 'eager', 2.0, 1.5), row('2F', 'compiled', 2.3, 1.95), row('all-L', 'eager', 2.95, 2.3),
            row('all-L', 'compiled', 2.8, 2.35), row('2F', 'eager', 9.0, 9.0, size='512x1024')]
    verdicts = {t['target']: (t['value'], t['met']) for t in baseline_targets(rows)}
    assert verdicts == {'2F >= x2.2 against the eager teacher (1024x2048)': ('x2.30', True),
                        'all-L >= x2.9 against the eager teacher (1024x2048)': ('x2.95', True),
                        '2F >= x1.9 against the compiled teacher (1024x2048)': ('x1.95', True),
                        'all-L >= x2.4 against the compiled teacher (1024x2048)': ('x2.35', False)}
    assert baseline_targets([row('2F', 'eager', 2.3)]) == [
        {'target': '2F >= x2.2 against the eager teacher (1024x2048)', 'value': 'x2.30', 'met': True}]
