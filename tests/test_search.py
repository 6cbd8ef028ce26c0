"""Beam search (pure), and tools/search.py end to end: resumable state, latency model, export."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from mmengine.config import Config

from jetvit_mm.mm.search.scoring import backbone_args, check_metric, load_supernet
from jetvit_mm.models import JetViT
from jetvit_mm.models.checkpoint import read
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.search import search_step1, search_step2, step1_moves, step2_moves
from jetvit_mm.search.report import layer_gains, pareto_front

from .conftest import HANG_GUARD_S, REPO, run_tool
from .test_supernet import make_teacher_checkpoint

PROBE = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'
DISTILL = REPO / 'tests' / 'configs' / 'distill_supernet_tiny_cityscapes.py'
WEIGHTS = [0.5, 0.1, 0.3, 0.05, 0.0, 0.2]


class ToyScore:
    """W helps at some layers, too many W hurt; F helps with diminishing returns. Counts calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, arch: str) -> float:
        self.calls.append(arch)
        w = sum(WEIGHTS[i] for i, c in enumerate(arch) if c == 'W') - 0.3 * max(0, arch.count('W') - 3)
        return w + sum(0.3 * (i + 1) / len(arch) for i, c in enumerate(arch) if c == 'F') - 0.05 * arch.count('F') ** 2


# ----------------------------------------------------------------------------- pure search
def test_moves():
    assert step1_moves('LWL') == ['WWL', 'LWW']
    assert step2_moves('LWF') == ['FWF', 'LFF']


def test_step1_stops_at_plateau_and_scores_each_arch_once():
    score = ToyScore()
    result = search_step1(score, 6, beam_width=2, min_gain=0.01)
    assert result.stop_reason.startswith('plateau')
    assert len(score.calls) == len(set(score.calls)) == len(result.scores)
    gains = [b.best_score - a.best_score for a, b in zip(result.stages, result.stages[1:])]
    assert all(g >= 0.01 for g in gains[:-1]) and gains[-1] < 0.01
    assert result.best_score == max(result.scores.values()) and result.best_arch.count('F') == 0


def test_beam_width_is_honoured():
    for width in (1, 2, 3):
        result = search_step1(ToyScore(), 6, beam_width=width, min_gain=-1.0, max_stages=3)
        for previous, stage in zip(result.stages, result.stages[1:]):
            assert len(stage.beam) <= width
            expected = {m for arch in previous.beam for m in step1_moves(arch)}
            assert set(stage.candidates) <= expected
            assert set(stage.candidates) >= expected - {a for s in result.stages[:stage.index] for a in s.candidates}
    narrow = search_step1(ToyScore(), 6, beam_width=1, min_gain=-1.0, max_stages=3)
    wide = search_step1(ToyScore(), 6, beam_width=3, min_gain=-1.0, max_stages=3)
    assert len(narrow.scores) < len(wide.scores)


def test_step2_stops_at_tolerance_or_max_full():
    start = 'WLWLLW'
    reached = search_step2(ToyScore(), start, beam_width=2, teacher_score=1.3, tolerance=0.2)
    assert reached.stop_reason.startswith('target reached') and reached.best_score >= 1.1
    assert reached.stages[-2].best_score < 1.1  # it did not stop early
    capped = search_step2(ToyScore(), start, beam_width=2, max_full=2)
    assert capped.stop_reason.startswith('max_full') and capped.best_arch.count('F') == 2
    with pytest.raises(ValueError, match='needs a stop rule'):
        search_step2(ToyScore(), start)


def test_same_seed_same_result_and_memo_is_reused():
    a, b = search_step1(ToyScore(), 6, beam_width=2, seed=3), search_step1(ToyScore(), 6, beam_width=2, seed=3)
    assert (a.best_arch, a.scores, [s.beam for s in a.stages]) == (b.best_arch, b.scores, [s.beam for s in b.stages])
    memo = dict(list(a.scores.items())[:5])
    score = ToyScore()
    c = search_step1(score, 6, beam_width=2, seed=3, scores=memo)
    assert c.best_arch == a.best_arch and not set(score.calls) & set(list(a.scores)[:5])


def test_latency_budget():
    cost = lambda arch: 10 + sum({'L': 1, 'W': 2, 'F': 5}[c] for c in arch)  # noqa: E731
    result = search_step1(ToyScore(), 6, beam_width=2, cost=cost, budget=19)
    assert all(cost(a) <= 19 for a in result.scores)
    with pytest.raises(ValueError, match='costs 16 > budget 15'):
        search_step1(ToyScore(), 6, cost=cost, budget=15)


def test_pareto_front_and_layer_gains():
    points = {'A': (1.0, 10.0), 'B': (2.0, 20.0), 'C': (1.5, 25.0), 'D': (3.0, 30.0)}
    assert pareto_front(points) == ['A', 'B', 'D']
    result = search_step2(ToyScore(), 'LLLLLL', beam_width=6, max_full=1)
    gains = layer_gains(result.stages, result.scores, 6)
    assert len(gains) == 1 and all(g == pytest.approx(result.scores['L' * i + 'F' + 'L' * (5 - i)]
                                                   - result.scores['LLLLLL']) for i, g in enumerate(gains[0]))


# ----------------------------------------------------------------------------- the tool
@pytest.fixture(scope='module')
def pipeline(tiny_cityscapes, tmp_path_factory):
    """Tiny teacher -> its probe head -> Step-1 supernet."""
    root = tmp_path_factory.mktemp('pipeline')
    teacher = make_teacher_checkpoint(root / 'teacher.pth')
    data = [f'{split}_dataloader.dataset.data_root={tiny_cityscapes}' for split in ('train', 'val', 'test')]
    run_tool('train.py', PROBE, '--work-dir', root / 'probe', '--cfg-options', *data, 'model.backbone.arch=FFFF',
             f'model.backbone.checkpoint={teacher}', 'train_cfg.max_iters=10', 'train_cfg.val_interval=10',
             'default_hooks.checkpoint.interval=10')
    run_tool('train.py', DISTILL, '--work-dir', root / 'step1', '--cfg-options', data[0],
             f'model.teacher.checkpoint={teacher}', 'train_cfg.max_iters=6', 'default_hooks.checkpoint.interval=6')
    return dict(root=root, data=tiny_cityscapes, teacher=teacher, head=root / 'probe' / 'iter_10.pth',
                step1=root / 'step1' / 'iter_6.pth')


def search_args(p, work_dir, *extra, stage=1, ckpt=None):
    return [PROBE, ckpt or p['step1'], '--stage', str(stage), '--head-checkpoint', p['head'], '--work-dir', work_dir,
            '--beam-width', '2', *extra, '--cfg-options', f'val_dataloader.dataset.data_root={p["data"]}']


@pytest.mark.integration
def test_search_end_to_end_export_matches_test_tool(pipeline, tmp_path):
    p = pipeline
    work = tmp_path / 'search'
    run_tool('search.py', *search_args(p, work, '--min-gain', '0.0'))
    step1 = (work / 'best_arch_step1.txt').read_text().strip()
    run_tool('train.py', DISTILL, '--work-dir', tmp_path / 'step2', '--cfg-options',
             f'train_dataloader.dataset.data_root={p["data"]}', f'model.teacher.checkpoint={p["teacher"]}',
             'train_cfg.max_iters=4', 'default_hooks.checkpoint.interval=4', 'model.student.search_space=None',
             f'model.student.step1_arch={step1}')
    run_tool('search.py', *search_args(p, work, '--max-full', '2', '--tolerance', '0.5', '--export',
                                       '--distill-config', DISTILL, stage=2, ckpt=tmp_path / 'step2' / 'iter_4.pth'))
    summary = json.loads((work / 'search.json').read_text())
    best = summary['best']['2']['arch']
    assert best.count('F') <= 2 and all(a == 'F' or a == b for a, b in zip(best, step1))
    assert {r['stage'] for r in summary['archs']} == {1, 2}
    assert all({'score', 'predicted_latency_ms', 'L', 'W', 'F', 'pareto'} <= set(r) for r in summary['archs'])
    assert summary['teacher_latency_ms'] > 0
    # the teacher's score is the probe's own (teacher backbone + its head), as tools/test.py measures it
    teacher_out = tmp_path / 'teacher_metrics.json'
    run_tool('test.py', PROBE, p['head'], '--work-dir', tmp_path / 'test_teacher', '--out', teacher_out,
             '--cfg-options', 'model.backbone.arch=FFFF', f'test_dataloader.dataset.data_root={p["data"]}')
    assert json.loads(teacher_out.read_text())['mIoU'] == pytest.approx(summary['teacher_score'], abs=1e-6)
    # Fig. 7's numbers are in search.json too: per stage and search step, each one-layer move's gain
    gains = summary['layer_gains']
    assert set(gains) == {'1', '2'} and all(len(row) == len(best) for rows in gains.values() for row in rows)
    stages = json.loads((work / 'search_state.json').read_text())['stages']
    checked = 0
    for step, target in (('1', 'W'), ('2', 'F')):
        scores = {r['arch']: r['score'] for r in summary['archs'] if r['stage'] == int(step)}
        parents = stages[step]['stages'][0]  # each search stage's best arch: the next stage moves from it
        assert len(gains[step]) == len(parents) - 1
        for parent, row in zip(parents, gains[step]):
            for i, gain in enumerate(row):  # one layer of the parent turned into W (step 1) or F (step 2)
                if gain is not None:
                    child = parent[:i] + target + parent[i + 1:]
                    assert gain == pytest.approx(scores[child] - scores[parent])
                    checked += 1
    assert checked > 0
    for name in ('pareto_step1.png', 'pareto_step2.png', 'layer_gains_step2.png', 'best_arch_step2.txt'):
        assert (work / name).is_file() and (work / name).stat().st_size > 0
    # the exported hybrid, evaluated by tools/test.py, gives the score the search reported for that arch
    out = tmp_path / 'metrics.json'
    run_tool('test.py', PROBE, work / f'hybrid_{best}_with_head.pth', '--work-dir', tmp_path / 'test', '--out', out,
             '--cfg-options', f'model.backbone.arch={best}', f'test_dataloader.dataset.data_root={p["data"]}')
    assert json.loads(out.read_text())['mIoU'] == pytest.approx(summary['best']['2']['score'], abs=1e-6)
    # tools/test.py refuses what mmengine's non-strict load_from would only warn about: another arch (W and F
    # layers have the same keys) and a checkpoint that leaves the head as initialised
    swapped = best.replace('W', 'F', 1) if 'W' in best else best.replace('F', 'W', 1)
    for ckpt, arch, message in ((f'hybrid_{best}_with_head.pth', swapped, f'holds a model with arch {best!r}'),
                                (f'hybrid_{best}.pth', best, 'missing keys: ')):
        proc = run_tool('test.py', PROBE, work / ckpt, '--work-dir', tmp_path / 'test_bad', '--cfg-options',
                        f'model.backbone.arch={arch}', f'test_dataloader.dataset.data_root={p["data"]}', check=False)
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-3000:]
    # ... and a hybrid exported with another W window / L option (no parameters: the keys alone cannot tell)
    proc = run_tool('test.py', PROBE, work / f'hybrid_{best}_with_head.pth', '--work-dir', tmp_path / 'test_bad',
                    '--cfg-options', f'model.backbone.arch={best}', 'model.backbone.mixers.W.window_size=8',
                    'model.backbone.mixers.L.focusing=3.0', f'test_dataloader.dataset.data_root={p["data"]}',
                    check=False)
    assert proc.returncode != 0 and 'holds a model built with' in proc.stderr, proc.stderr[-3000:]
    # the exported backbone loads strictly with its arch and equals the supernet with that path active
    supernet, _ = load_supernet(str(tmp_path / 'step2' / 'iter_4.pth'), Config.fromfile(PROBE))
    hybrid = JetViT(arch=best, checkpoint=work / f'hybrid_{best}.pth', **backbone_args(Config.fromfile(PROBE))).eval()
    supernet.set_arch(best)
    x = torch.randn(1, 3, 64, 128)
    with torch.no_grad():
        assert torch.equal(hybrid(x)[0], supernet(x)[0])
    wrong = best.replace('L', 'W', 1) if 'L' in best else best.replace('F', 'W', 1)
    with pytest.raises(ValueError, match='holds a JetViT with arch'):
        JetViT(arch=wrong, checkpoint=work / f'hybrid_{best}.pth', **backbone_args(Config.fromfile(PROBE)))
    # ... and with the window / L options it was exported with (they have no parameters of their own)
    other = dict(backbone_args(Config.fromfile(PROBE)),
                 mixers=default_mixers(W=dict(window_size=8), L=dict(focusing=3.0)))
    with pytest.raises(ValueError, match='holds a JetViT built with'):
        JetViT(arch=best, checkpoint=work / f'hybrid_{best}.pth', **other)
    # the bf16 deployment switch is not such an option: the same computation, rounded elsewhere under autocast
    mixed = dict(backbone_args(Config.fromfile(PROBE)),
                 mixers=default_mixers(W=dict(window_size=4), L=dict(precision='mixed')))
    with torch.no_grad():
        assert torch.equal(JetViT(arch=best, checkpoint=work / f'hybrid_{best}.pth', **mixed).eval()(x)[0],
                           hybrid(x)[0])
    # the fine-tuning config (arch fixed, distillation) trains
    run_tool('train.py', work / f'finetune_{best}.py', '--work-dir', tmp_path / 'ft', '--cfg-options',
             f'train_dataloader.dataset.data_root={p["data"]}', f'model.teacher.checkpoint={p["teacher"]}',
             'train_cfg.max_iters=1')
    ft_state = read(str(tmp_path / 'ft' / 'iter_1.pth')).raw['state_dict']
    # the fine-tuned run's checkpoint is a backbone checkpoint too (pipeline step 6): the student's weights, with
    # the arch read from the run's saved config; a supernet checkpoint is refused (no single arch)
    finetuned = JetViT(arch=best, checkpoint=tmp_path / 'ft' / 'iter_1.pth', **backbone_args(Config.fromfile(PROBE)))
    for k, v in finetuned.state_dict().items():
        assert torch.equal(v, ft_state[f'student.{k}']), k
    assert any(not torch.equal(v, hybrid.state_dict()[k]) for k, v in finetuned.state_dict().items())
    with pytest.raises(ValueError, match='holds a JetViT with arch'):
        JetViT(arch=wrong, checkpoint=tmp_path / 'ft' / 'iter_1.pth', **backbone_args(Config.fromfile(PROBE)))
    with pytest.raises(ValueError, match='supernet checkpoint'):
        JetViT(arch=best, checkpoint=tmp_path / 'step2' / 'iter_4.pth', **backbone_args(Config.fromfile(PROBE)))


def test_exported_finetune_config_builds_the_searched_model(tmp_path):
    """The fine-tuning config of a ViT-L search builds a ViT-L student (the searched supernet's arguments), and a
    distillation config of another teacher is refused at export."""
    from mmengine.registry import DefaultScope
    from mmengine.utils import import_modules_from_strings

    from jetvit_mm.mm.apis.export import export_hybrid
    from jetvit_mm.models.supernet import JetViTSupernet

    size = dict(embed_dim=32, depth=2, num_heads=2)
    supernet = JetViTSupernet(search_space='LWF', model_name='dinov3_vitl16',
                              mixers=default_mixers(W=dict(window_size=4)), **size)
    large = REPO / 'configs' / 'jetvit' / 'dinov3_large_cityscapes.py'
    with_ema = tmp_path / 'distill_with_ema.py'  # a user's distillation config with a hook of its own
    with_ema.write_text(f"_base_ = ['{large}']\ncustom_hooks = [dict(type='SupernetSamplerHook', mode='uniform'), "
                        "dict(type='EMAHook', momentum=0.001)]\n")
    paths = export_hybrid(supernet, 'WL', tmp_path, distill_config=str(with_ema))
    cfg = Config.fromfile(paths['finetune_config'])
    assert cfg.model.student.model_name == cfg.model.teacher.model_name == 'dinov3_vitl16'
    assert cfg.custom_hooks == [dict(type='EMAHook', momentum=0.001)]  # the path sampler goes, the EMA stays
    import_modules_from_strings(**cfg.custom_imports)
    with DefaultScope.overwrite_default_scope('mmseg'):
        from mmseg.registry import MODELS
        student = MODELS.build(cfg.model.student)
    assert (student.arch, student.build_args['mixers']['W']['window_size'], student.embed_dim) == ('WL', 4, 32)
    supernet.set_arch('WL')
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        assert torch.equal(student.eval()(x)[0], supernet.eval()(x)[0])
    with pytest.raises(ValueError, match='distils from a dinov3_vitb16 teacher'):
        export_hybrid(supernet, 'WL', tmp_path / 'b', distill_config=str(large.with_name('dinov3_base_cityscapes.py')))


@pytest.mark.integration
def test_killed_search_resumes_without_rescoring(pipeline, tmp_path):
    p = pipeline
    reference = tmp_path / 'reference'
    run_tool('search.py', *search_args(p, reference, '--min-gain', '-100'))
    ref_state = json.loads((reference / 'search_state.json').read_text())['stages']['1']

    killed = tmp_path / 'killed'
    env = dict(os.environ, PYTHONUNBUFFERED='1')
    cmd = [sys.executable, str(REPO / 'tools' / 'search.py'), *map(str, search_args(p, killed, '--min-gain', '-100'))]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state_file, deadline = killed / 'search_state.json', time.time() + HANG_GUARD_S
    while time.time() < deadline:
        if state_file.is_file() and len(json.loads(state_file.read_text())['stages']['1']['scores']) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = json.loads(state_file.read_text())['stages']['1']
    assert 3 <= len(partial['scores']) < len(ref_state['scores']), 'killed before the end'

    run_tool('search.py', *search_args(p, killed, '--min-gain', '-100', '--resume'))
    final = json.loads(state_file.read_text())['stages']['1']
    scored = [arch for arch, _, _ in final['history']]
    assert len(scored) == len(set(scored)), 'an arch was scored twice'
    assert set(scored) == set(ref_state['scores'])
    assert final['scores'] == ref_state['scores'] and final['best_arch'] == ref_state['best_arch']
    assert [a for a, _, _ in final['history'][:len(partial['history'])]] == [a for a, _, _ in partial['history']]


@pytest.mark.integration
def test_search_latency_size_is_the_preprocessed_input(pipeline, tmp_path):
    """ADE20K images are rarely multiples of the patch (512x683): the latency model times the size the backbone
    sees: one sliding window (32x32 in this config) of the preprocessed image, in whole patches. The teacher is
    scored per stage (its metric and head)."""
    from .fixtures.datasets import make_ade20k
    ade = make_ade20k(tmp_path / 'ade', splits={'training': 1, 'validation': 2}, size=(64, 85), seed=0)
    work = tmp_path / 'search'
    run_tool('search.py', REPO / 'tests/configs/seg_linear_probe_tiny_ade20k.py', pipeline['step1'], '--metric',
             'distill_loss', '--beam-width', '1', '--work-dir', work, '--cfg-options',
             f'val_dataloader.dataset.data_root={ade}')
    state = json.loads((work / 'search_state.json').read_text())
    stage = state['stages']['1']
    assert stage['latency_size'] == [32, 32]
    assert 'teacher_score' not in state and stage['teacher_score'] == pytest.approx(0.0, abs=1e-12)
    assert (stage['metric'], stage['head_checkpoint']) == ('distill_loss', None)
    assert stage['min_gain'] == pytest.approx(0.001)  # the default plateau scaled to a loss, not 0.1 mIoU points


@pytest.mark.integration
def test_search_refuses_a_config_whose_mixers_differ_from_the_distillation(pipeline, tmp_path):
    """Window size and L options have no parameters of their own: the distillation run's saved config is compared
    with the evaluation config's backbone before any scoring (the weights alone would load)."""
    p = pipeline
    for option, message in (('model.backbone.mixers.W.window_size=8', 'distilled with mixers.W.window_size=4'),
                            ('model.backbone.mixers.L.focusing=3.0', 'distilled with mixers.L.focusing=')):
        proc = run_tool('search.py', PROBE, p['step1'], '--head-checkpoint', p['head'], '--work-dir', tmp_path,
                        '--cfg-options', f'val_dataloader.dataset.data_root={p["data"]}', option, check=False)
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]
        assert not (tmp_path / 'search_state.json').exists()
    # the export reads the same config and takes the same --cfg-options the error message suggests
    export = ['export_hybrid.py', PROBE, p['step1'], '--arch', 'LWLW', '--out-dir', tmp_path / 'export']
    proc = run_tool(*export, '--cfg-options', 'model.backbone.mixers.W.window_size=8', check=False)
    assert proc.returncode != 0 and 'distilled with mixers.W.window_size=4' in proc.stderr, proc.stderr[-2000:]
    run_tool(*export, '--cfg-options', 'model.backbone.mixers.W.window_size=4')
    assert (tmp_path / 'export' / 'hybrid_LWLW.pth').is_file()


def test_distill_loss_score_uses_the_distillation_runs_objective(tmp_path):
    """--metric distill_loss scores with the loss, loss options and layers the supernet was distilled with."""
    from jetvit_mm.mm.search.scoring import DEFAULT_DISTILL_OBJECTIVE, saved_distill_objective
    cfg = ("model = dict(type='FeatureDistiller', loss='activation', loss_cfg=dict(max_tokens=64), "
           "distill_indices=(0, -1), teacher=dict(type='JetViT'))\n")
    torch.save({'state_dict': {}, 'meta': {'cfg': cfg}}, tmp_path / 'run.pth')
    assert saved_distill_objective(str(tmp_path / 'run.pth')) == dict(
        loss='activation', loss_cfg=dict(max_tokens=64), distill_indices=(0, -1))
    torch.save({'state_dict': {}, 'meta': {}}, tmp_path / 'bare.pth')
    assert saved_distill_objective(str(tmp_path / 'bare.pth')) == DEFAULT_DISTILL_OBJECTIVE


def test_latency_table_times_a_copy_on_another_device_or_dtype():
    from jetvit_mm.search.latency import measure_latency_table
    model = JetViT('dinov3_vits16', arch='LW', embed_dim=32, depth=2, num_heads=2,
                   mixers=default_mixers(W=dict(window_size=4)))
    table = measure_latency_table(model, (32, 48), dtype=torch.float64, warmup=0, repeat=1)
    assert set(table) == {'base', 'F', 'L', 'W'} and all(v > 0 for v in table.values())
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the caller's model was not converted


def test_metric_names_of_string_options():
    """mmdet's own box-only base sets CocoMetric(metric='bbox') and mmseg accepts iou_metrics='mDice': one name as a
    plain string, not a list of one-letter kinds."""
    assert check_metric('coco/bbox_mAP', dict(type='CocoMetric', metric='bbox')) is True
    assert check_metric('coco/segm_mAP', dict(type='mmdet.CocoMetric', metric=['bbox', 'segm'])) is True
    with pytest.raises(ValueError, match=r"CocoMetric reports \['coco/bbox_mAP', "):
        check_metric('coco/segm_mAP', dict(type='CocoMetric', metric='bbox'))
    assert check_metric('mDice', dict(type='IoUMetric', iou_metrics='mDice')) is True
    with pytest.raises(ValueError, match="unknown metric 'mIoU'"):
        check_metric('mIoU', dict(type='IoUMetric', iou_metrics='mDice'))


@pytest.mark.integration
def test_search_bad_input_fails_before_scoring(pipeline, tmp_path):
    p = pipeline

    def fails(*extra, ckpt=None, stage=1):
        proc = run_tool('search.py', *search_args(p, tmp_path / 'bad', *extra, stage=stage, ckpt=ckpt), check=False)
        assert proc.returncode != 0
        assert not (tmp_path / 'bad' / 'search_state.json').exists()
        return proc.stderr

    assert "unknown metric 'mIoUU'" in fails('--metric', 'mIoUU')
    assert "metric 'mPrecision' has no declared direction" in fails('--metric', 'mPrecision')
    assert 'is not a supernet distillation checkpoint' in fails(ckpt=p['head'])
    assert 'latency budget 0.001 ms is impossible' in fails('--latency-budget', '0.001')
    bad_table = tmp_path / 'bad_table.json'
    bad_table.write_text(json.dumps({'base': 1.0, 'F': 100.0, 'L': 10.0}))
    assert 'a latency table needs non-negative milliseconds for base, F, L, W' in fails('--latency-table', bad_table)
    # a given table (e.g. measured on the deployment device) replaces the measured one: the start arch (all L)
    # is costed with it
    table = tmp_path / 'table.json'
    table.write_text(json.dumps({'key': {'size': [1024, 2048]}, 'table': {'base': 1.0, 'F': 100.0, 'L': 10.0,
                                                                         'W': 20.0}}))
    depth = Config.fromfile(PROBE).model.backbone.depth
    assert f'is predicted at {1 + 10 * depth:.1f} ms' in fails('--latency-table', table, '--latency-budget', '5')
