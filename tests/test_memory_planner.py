"""The memory planner (issue #24 item 6): its total against the measured peak RSS of a real training step at tiny
sizes on the CPU (fresh processes, single process, fp32, with and without activation checkpointing; at least every
tensor byte, and within 15 % of the peak but for the process's own overhead), its state arithmetic, the tool on the
shipped configs, and bad input named."""
import json
import re
from pathlib import Path

import pytest
import torch

from jetvit_mm.benchmark.memory import build_distill, measure_train_step_memory
from jetvit_mm.benchmark.planner import Activations, ParamCounts, count_params, measure_activations, plan_memory
from jetvit_mm.models.mixers import default_mixers

from .conftest import HANG_GUARD_S
from .test_bad_input import load_tool

REPO = Path(__file__).resolve().parents[1]
# large enough that activations (~90-180 MB) dominate allocator noise, small enough for ~15 s per process
TINY = dict(model=dict(model_name='dinov3_vits16', embed_dim=192, depth=4, num_heads=2,
                       mixers=default_mixers(W=dict(window_size=8))),
            arch='LWFW', input_shape=[2, 3, 256, 1024], threads=2)
# a second shape: wider, one image, F first
TINY_WIDE = dict(model=dict(model_name='dinov3_vits16', embed_dim=256, depth=3, num_heads=4,
                            mixers=default_mixers(W=dict(window_size=8))),
                 arch='FWL', input_shape=[1, 3, 384, 768], threads=2)
SHAPES = {'tiny': TINY, 'tiny_wide': TINY_WIDE}


def tiny_plan(spec: dict, checkpointing: bool) -> dict:
    with torch.device('meta'):
        model, loss_fn = build_distill(dict(spec, checkpointing=False))
    x = torch.empty(*spec['input_shape'], device='meta')
    blocks = list(model.student.blocks)
    acts = measure_activations(model, blocks, lambda: loss_fn(x))
    params = count_params(model, list(model.teacher.blocks) + blocks, blocks)
    return plan_memory(params, acts, world_size=1, fsdp=False)['checkpointing' if checkpointing else
                                                                  'no_checkpointing'] | {'params': params}


@pytest.mark.parametrize('shape', list(SHAPES))
@pytest.mark.parametrize('checkpointing', [False, True], ids=['no_checkpointing', 'checkpointing'])
@pytest.mark.integration  # one measuring process per case
def test_planned_total_matches_the_measured_train_step_peak(shape, checkpointing):
    measured = measure_train_step_memory(dict(SHAPES[shape], checkpointing=checkpointing), timeout=HANG_GUARD_S)
    planned = tiny_plan(SHAPES[shape], checkpointing)
    peak, overhead = measured['peak_increase_bytes'], measured['overhead_bytes']
    ratio = planned['total'] / peak
    print(json.dumps({'shape': shape, 'checkpointing': checkpointing, 'planned_MiB': planned['total'] / 2 ** 20,
                      'planned_activations_MiB': planned['activations'] / 2 ** 20, 'measured_MiB': peak / 2 ** 20,
                      'overhead_MiB': overhead / 2 ** 20, 'ratio': ratio}))
    assert measured['method'] == 'VmHWM after clear_refs'
    # the activations matter: the state alone would miss the measured peak by far more than the tolerance
    assert (planned['total'] - planned['activations']) / peak < 0.7
    # every tensor byte of the step is planned: the measured peak less the process's growth beyond its live tensors
    # (library caches, allocator arenas: ~44 MiB here, which no plan counts, as the CUDA context on a GPU)
    assert planned['total'] >= peak - overhead, f'planned {planned["total"]} B < tensors {peak - overhead} B'
    # and the plan is the measured peak within 15 %, but for that overhead: a fixed amount that varies by machine
    # (ratios 0.955-0.971 here in 4-6 loaded runs, 0.84-0.85 on another 2-core machine, issue 29) and is a third of the
    # smaller checkpointed peak (a fifth to a quarter of the other), hence the lower bound there (docs/scale_out.md)
    low = 0.75 if checkpointing else 0.85
    assert low <= ratio <= 1.15, f'planned {planned["total"]} B vs measured {peak} B'


@pytest.mark.parametrize('shape', list(SHAPES))
def test_meta_device_count_equals_the_real_tensor_count(shape):
    """What the planner counts on the meta device (no memory) is what autograd saves on real CPU tensors (CPU flash
    attention; on meta the fused memory-efficient kernel stands in for the math path)."""
    counts = []
    for device in ('meta', 'cpu'):
        torch.manual_seed(0)
        with torch.device(device):
            model, loss_fn = build_distill(dict(SHAPES[shape], checkpointing=False))
        x = torch.randn(*SHAPES[shape]['input_shape'], device=device)
        counts.append(measure_activations(model, list(model.student.blocks),
                                          lambda f=loss_fn, x=x: f(x)))
    meta, cpu = counts
    assert meta.outside == cpu.outside and meta.block_inputs == cpu.block_inputs
    assert meta.largest_saved == cpu.largest_saved and meta.largest_input == cpu.largest_input
    assert meta.per_block == pytest.approx(cpu.per_block, rel=1e-3)  # the log-sum-exp's padding differs


def test_state_is_sharded_by_world_size_under_fsdp_and_replicated_without():
    params = ParamCounts(trainable=1000, frozen=500, largest_unit=100, largest_student_unit=80, root=10)
    acts = Activations(outside=7, per_block=[5, 9, 5], block_inputs=3, largest_saved=2, largest_input=1)
    assert acts.backward_working() == 6 and acts.peak(False) == 7 + 19 + 6 and acts.peak(True) == 7 + 3 + 9 + 6
    one = plan_memory(params, acts, 1, fsdp=False)
    assert (one['parameters'], one['gradients'], one['optimizer']) == (6000, 4000, 8000)
    ddp = plan_memory(params, acts, 8, fsdp=False)
    assert ddp['gradients'] == 8000 and ddp['optimizer'] == 8000  # DDP's buckets: a second copy of the gradients
    fsdp = plan_memory(params, acts, 4, fsdp=True, param_dtype='bfloat16', gpu_bytes=6000)
    assert fsdp['parameters'] == 4 * 1500 // 4 + 2 * (2 * 100 + 10)
    assert fsdp['gradients'] == 4 * 1000 // 4 + 6 * 80 and fsdp['optimizer'] == 8 * 1000 // 4
    assert fsdp['no_checkpointing']['total'] == fsdp['state_total'] + 32 and fsdp['checkpointing']['fits']
    assert not plan_memory(params, acts, 4, fsdp=True, gpu_bytes=4000)['no_checkpointing']['fits']
    with pytest.raises(ValueError, match='world_size must be >= 1'):
        plan_memory(params, acts, 0, fsdp=True)


@pytest.mark.filterwarnings('ignore:FeatureDistiller')
def test_tool_plans_the_7b_config_fits_8_gpus_not_1(tmp_path):
    tool = load_tool('benchmark')
    config = str(REPO / 'configs/jetvit/dinov3_7b_cityscapes.py')
    eight = tool.main(['plan', config, '--world-size', '8', '--json', str(tmp_path / 'p.json')])['plans'][0]
    assert eight['fsdp'] and eight['param_dtype'] == 'bfloat16' and eight['batch'] == 2
    assert eight['size'] == [512, 1024] and set(eight['by_arch']) == {'L' * 40, 'W' * 40}
    assert eight['checkpointing']['fits'] and eight['checkpointing']['activations'] < eight['no_checkpointing'][
        'activations'] / 5
    assert 6.6e9 < eight['params']['frozen'] < 6.8e9 and eight['params']['trainable'] > eight['params']['frozen']
    one = tool.main(['plan', config, '--world-size', '1'])['plans'][0]
    assert not one['checkpointing']['fits'] and one['optimizer'] == 8 * one['params']['trainable']
    assert json.loads((tmp_path / 'p.json').read_text())['command'] == 'plan'


@pytest.mark.parametrize('argv, message', [
    ('{cfg} --world-size 0', r'--world-size: expected an integer >= 1, got 0'),
    ('{cfg} --world-size 8 --batch 0', r'--batch: expected an integer >= 1, got 0'),
    ('{cfg} --world-size 8 --gpu-mem-gb 0', r'--gpu-mem-gb: expected a finite number > 0'),
    ('{missing} --world-size 8', r'config file not found: .*missing\.py'),
])
def test_tool_bad_arguments_are_named(argv, message, capsys):
    tool = load_tool('benchmark')
    cfg = str(REPO / 'configs/jetvit/dinov3_base_cityscapes.py')
    with pytest.raises(SystemExit) as exit_info:
        tool.parse_args(['plan'] + argv.format(cfg=cfg, missing='/nonexistent/missing.py').split())
    assert exit_info.value.code == 2
    assert re.search(message, capsys.readouterr().err)


@pytest.mark.filterwarnings('ignore:FeatureDistiller')
@pytest.mark.parametrize('config, argv, message', [
    ('jetvit/dinov3_base_cityscapes.py', '--size 500 1024', r'--size 500 1024: not a multiple of the patch size 16'),
    ('depth/depthanything_large_eval.py', '', r'not a FeatureDistiller'),
])
def test_tool_bad_plans_are_named(config, argv, message):
    tool = load_tool('benchmark')
    with pytest.raises(SystemExit, match=message):
        tool.main(['plan', str(REPO / 'configs' / config), '--world-size', '8'] + argv.split())
