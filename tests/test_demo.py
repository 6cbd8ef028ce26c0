"""The demo (jetvit_mm/demo/run.py, tools/demo.py): the stages it shares with tools/pipeline.py, the engine
running them side by side, checkpoint extraction, latency table, report and configs, and the whole pipeline at a
tiny number of iterations (twice: the second run reuses the cached teacher and gives the same table).

The full-size demo (about 6 minutes on 2 idle CPU cores) is not part of the test suite: `make demo` runs it.
"""
import importlib.util
import json
import time

import pytest
import torch
from mmengine.config import Config, DictAction
from mmengine.registry import DefaultScope

from jetvit_mm.demo import run as paths
from jetvit_mm.demo.latency import measure_interleaved
from jetvit_mm.demo.report import write_report
from jetvit_mm.demo.run import DEPTH, DemoOptions
from jetvit_mm.models.checkpoint.extract import extract_backbone
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.pipeline import stages
from jetvit_mm.pipeline.engine import Workflow
from jetvit_mm.pipeline.products import MARKER
from jetvit_mm.pipeline.stage import Stage, python_tool

from .conftest import REPO, run_tool

TINY_DEMO = ('--teacher-iters', '20', '--distill-iters', '8', '--finetune-iters', '4', '--probe-iters', '4',
             '--train-images', '16', '--val-images', '8', '--no-latency')


def test_stages_run_side_by_side_once_their_inputs_are_done_the_earlier_first(tmp_path):
    """``jobs=2``: never more than two at a time, a stage only after the stages it depends on, a waiting stage
    earlier in the list before a later one."""
    events, running = [], []

    def stage(name, deps=(), seconds=0.2):
        def action(s):
            running.append(name)
            events.append(('start', name, len(running)))
            time.sleep(seconds)
            running.remove(name)
            events.append(('end', name))
        return Stage(name, tmp_path / name, [name], deps=deps, action=action)
    wf = Workflow(tmp_path, log=lambda m: None)
    wf.run_all([stage('a'), stage('b', ['a']), stage('c', seconds=1.0), stage('d'), stage('e', ['b'])], jobs=2)
    starts = [e[1] for e in events if e[0] == 'start']
    # a and c start together (which thread reaches its first line first is the OS's choice); when a ends, b (its
    # dependant, earlier in the list) goes before d, and when b ends, d before e
    assert set(starts[:2]) == {'a', 'c'} and starts[2:] == ['b', 'd', 'e']
    assert max(e[2] for e in events if e[0] == 'start') == 2
    assert events.index(('end', 'a')) < events.index(('start', 'b', 2)) and set(wf.timings) == set('abcde')


@pytest.mark.integration  # the stage starts the tool's process
def test_a_failing_tool_stops_the_stages_after_it(tmp_path):
    wf = Workflow(tmp_path, log=lambda m: None)
    failing = Stage('export_x', tmp_path / 'export_x', python_tool(REPO, 'export_hybrid.py', '--no-such-option'))
    after = Stage('after', tmp_path / 'after', ['after'], deps=['export_x'], action=lambda s: None)
    with pytest.raises(RuntimeError, match='stage export_x failed'):
        wf.run_all([failing, after], jobs=2)
    assert (tmp_path / 'export_x' / 'stage.log').is_file()
    assert not (tmp_path / 'export_x' / MARKER).exists() and not (tmp_path / 'after').exists()  # not started


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(f'_tool_{name}', REPO / 'tools' / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_step_added_to_the_method_once_is_in_the_pipelines_and_the_demos_stages(tmp_path, monkeypatch, capsys):
    """One list of the method's stages: a step added to it appears in ``tools/pipeline.py --plan`` and in
    ``tools/demo.py --plan`` (the demo runs the same stages, its own after them); both plans run nothing."""
    def extra(b):
        return [Stage('extra_check', b.w / 'extra_check', ['extra'], deps=['test_hybrid'], action=lambda s: None)]
    monkeypatch.setattr(stages, 'STEPS', [*stages.STEPS, extra])
    _tool('pipeline').main([str(paths.DISTILL_CFG), '--teacher', str(REPO / 'README.md'), '--work-dir',
                            str(tmp_path / 'w'), '--data-root', str(tmp_path), '--plan'])
    pipeline = capsys.readouterr().out
    _tool('demo').main(['--work-dir', str(tmp_path / 'demo'), '--plan'])
    demo = capsys.readouterr().out
    assert not (tmp_path / 'w').exists() and not (tmp_path / 'demo').exists()
    names = [[line.split('] ')[1].split(':')[0] for line in text.splitlines() if line.startswith('# [')]
             for text in (pipeline, demo)]
    assert names[0][-2:] == ['report', 'extra_check'] and names[0] == [n for n in names[1] if n in names[0]]
    assert names[1][:3] == ['teacher', 'teacher_backbone', 'probe_teacher'] and 'test_teacher_small' in names[1]
    monkeypatch.setattr(stages, 'STEPS', stages.STEPS[:-1])
    _tool('demo').main(['--work-dir', str(tmp_path / 'demo'), '--plan'])
    assert '] extra_check:' not in capsys.readouterr().out


def test_extract_backbone_gives_a_loadable_jetvit(tmp_path):
    from jetvit_mm.models import JetViT

    args = dict(model_name='dinov3_vits16', embed_dim=32, depth=2, num_heads=2,
                mixers=default_mixers(W=dict(window_size=2)))
    student = JetViT(arch='LW', **args)
    runner_ckpt = tmp_path / 'iter_3.pth'
    state = {f'student.{k}': v for k, v in student.state_dict().items()}
    state.update({f'teacher.{k}': v for k, v in JetViT(**args).state_dict().items()})
    torch.save(dict(state_dict=state, meta=dict(iter=3)), runner_ckpt)
    out = extract_backbone(runner_ckpt, 'student.', tmp_path / 'student.pth')
    loaded = JetViT(arch='LW', checkpoint=out, **args)
    for key, value in student.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value)
    with pytest.raises(ValueError, match='holds a JetViT with arch'):
        JetViT(arch='WL', checkpoint=out, **args)
    direct = JetViT(arch='LW', checkpoint=runner_ckpt, **args)  # the runner checkpoint itself: its student
    for key, value in student.state_dict().items():
        assert torch.equal(direct.state_dict()[key], value)
    with pytest.raises(ValueError, match=r"iter_3\.pth has no weights under the prefix 'backbone\.'"):
        extract_backbone(runner_ckpt, 'backbone.', tmp_path / 'x.pth')


def test_report_table(tmp_path):
    summary = dict(teacher_score=90.0, archs=[
        dict(arch='LL', score=80.0, stage=1), dict(arch='LW', score=85.0, stage=1),
        dict(arch='LW', score=84.0, stage=2), dict(arch='FW', score=89.0, stage=2)])
    archs = dict(teacher='FF', all_L='LL', step1='LW', **{'1F': 'FW'})
    miou = dict(teacher=88.0, all_L=70.0, step1=80.0, **{'1F': 87.5})
    table = dict(base=1.0, F=10.0, W=4.0, L=3.0)
    report = write_report(tmp_path, tmp_path, summary, archs, miou, table)
    rows = {r['tag']: r for r in report['rows']}
    assert rows['teacher']['latency_ms'] == 21.0 and rows['teacher']['speedup'] == 1.0
    assert rows['all_L']['speedup'] == round(21 / 7, 2) and rows['all_L']['search_mIoU'] == 80.0
    assert rows['step1']['search_mIoU'] == 85.0  # its Step-1 score
    assert rows['1F']['mIoU'] == 87.5 and rows['1F']['F'] == 1
    text = (tmp_path / 'results.md').read_text()
    assert '| Step 2: + 1 F | `FW` | 87.50 | 89.00 | 15 | 1.40x |' in text
    assert (tmp_path / 'pareto_dinov3b_1024x2048.png').is_file()


def test_report_rows_of_the_alternatives(tmp_path):
    """Token clustering and the smaller teacher: no search score, their own latency (the clustered blocks, the
    clustering and the reconstruction; the smaller teacher's own blocks), placed in the table and the picture."""
    from jetvit_mm.models.token_reduction import parse_cluster_spec

    summary = dict(teacher_score=90.0, archs=[dict(arch='LLL', score=80.0, stage=1)])
    archs = dict(teacher='FFF', all_L='LLL', cluster_2F='FFF', cluster_all_L='FFF', teacher_small='FFF')
    miou = dict(teacher=88.0, all_L=70.0, cluster_2F=80.0, cluster_all_L=75.0, teacher_small=82.0)
    table = {'base': 1.0, 'F': 10.0, 'W': 4.0, 'L': 3.0, 'F@f2': 2.0, 'cluster f2': 0.5, 'reconstruct f2': 0.5,
             'small base': 0.5, 'small F': 4.0}
    clusterings = dict(cluster_2F=parse_cluster_spec('f2@1', 3), cluster_all_L=parse_cluster_spec('f2@0-1', 3))
    report = write_report(tmp_path, tmp_path, summary, archs, miou, table, clusterings)
    rows = {r['tag']: r for r in report['rows']}
    assert [r['tag'] for r in report['rows']] == ['teacher', 'all_L', 'cluster_2F', 'cluster_all_L', 'teacher_small']
    # cluster_2F: blocks 0-1 at full resolution, block 2 on the clusters; cluster_all_L: block 1 on the clusters
    assert rows['cluster_2F']['latency_ms'] == 1 + 2 * 10 + 2 + 0.5 + 0.5
    assert rows['cluster_all_L']['latency_ms'] == 1 + 10 + 2 + 10 + 0.5 + 0.5
    assert rows['teacher_small']['latency_ms'] == 0.5 + 3 * 4
    assert rows['teacher_small']['speedup'] == round(31 / 12.5, 2)
    assert all(rows[t]['search_mIoU'] is None for t in ('cluster_2F', 'cluster_all_L', 'teacher_small'))
    text = (tmp_path / 'results.md').read_text()
    assert '| teacher + token clustering, near 2-F speed | `FFF` + `f2@1` | 80.00 | - | 24 | 1.29x |' in text
    assert '| smaller teacher (half width) | `FFF` | 82.00 | - | 12 | 2.48x |' in text
    assert (tmp_path / 'pareto_dinov3b_1024x2048.png').stat().st_size > 0


def _build(cfg: Config):
    from mmseg.registry import MODELS

    import jetvit_mm.mm  # noqa: F401
    with DefaultScope.overwrite_default_scope('mmseg'):
        return MODELS.build(cfg.model)


def test_demo_configs_chain(tmp_path):
    """Teacher, probe and distillation configs share one backbone; the export's fine-tune config of the demo's
    distillation config builds a fixed-arch student from the exported weights; the inheritance configs differ
    only in what the student inherits."""
    from jetvit_mm.mm.apis.export import export_hybrid
    from jetvit_mm.models.supernet import JetViTSupernet

    configs = (paths.TEACHER_CFG, paths.PROBE_CFG, paths.DISTILL_CFG, paths.FIXED_CFG)
    cfgs = {p.stem: Config.fromfile(p) for p in configs}
    backbone = cfgs['distill_supernet_context_seg'].backbone
    assert backbone['depth'] == DEPTH
    for name in ('teacher_context_seg', 'probe_context_seg'):
        assert {k: cfgs[name].model.backbone[k] for k in backbone} == backbone
    assert cfgs['teacher_context_seg'].model.backbone.frozen is False
    assert cfgs['probe_context_seg'].model.backbone.frozen is True
    arch = 'LW' * (DEPTH // 2)
    supernet = JetViTSupernet(search_space='LW', **backbone)
    exported = export_hybrid(supernet, arch, tmp_path, distill_config=str(paths.DISTILL_CFG))
    finetune = Config.fromfile(exported['finetune_config'])
    model = _build(finetune)
    assert type(model.student).__name__ == 'JetViT' and model.student.arch == arch
    assert finetune.custom_hooks == []
    for inherit in ('all', 'mlp'):
        cfg = Config.fromfile(paths.FIXED_CFG)
        cfg.model.student.inherit = inherit
        model = _build(cfg)
        teacher_q = model.teacher.blocks[0].attn.qkv.weight
        assert torch.equal(model.student.blocks[0].attn.qkv.weight, teacher_q) == (inherit == 'all')
        assert torch.equal(model.student.blocks[0].mlp.fc1.weight, model.teacher.blocks[0].mlp.fc1.weight)


def test_small_teacher_is_the_teacher_at_half_width_with_the_same_recipe(tmp_path):
    """The smaller teacher's config: the teacher's, but 32 wide with 2 heads (same head width, depth, RoPE and
    registers), and its probe builds from the probe config with the demo's options; the token-clustering probe builds
    the teacher's backbone with clustering."""
    from jetvit_mm.demo.run import CLUSTERINGS, clustering_options, small_probe_options

    teacher, small = Config.fromfile(paths.TEACHER_CFG), Config.fromfile(paths.SMALL_TEACHER_CFG)
    width = dict(embed_dim=teacher.model.backbone.embed_dim // 2, num_heads=teacher.model.backbone.num_heads // 2)
    assert {k: small.model.backbone[k] for k in width} == width and small.model.decode_head.in_channels == 32
    expected = teacher.to_dict()
    expected['model']['backbone'].update(width)
    expected['model']['decode_head']['in_channels'] = width['embed_dim']
    got = small.to_dict()
    assert {k: v for k, v in got.items() if k != 'embed_dim'} == {k: v for k, v in expected.items()
                                                                   if k != 'embed_dim'}
    for options, kind in ((small_probe_options(), 'JetViT'), (clustering_options(CLUSTERINGS[0][1]),
                                                              'TokenClusteringJetViT')):
        probe = Config.fromfile(paths.PROBE_CFG)
        # as tools/train.py's --cfg-options reads them (mmengine's DictAction: '32' is an int)
        probe.merge_from_dict({k: DictAction._parse_iterable(v) for k, v in (o.split('=', 1) for o in options)})
        model = _build(probe)
        assert type(model.backbone).__name__ == kind and model.backbone.frozen
        if kind == 'JetViT':
            assert model.backbone.embed_dim == 32 and model.decode_head.conv_seg.in_channels == 32
        else:
            assert model.backbone.clustering.text == CLUSTERINGS[0][1]


@pytest.mark.integration
def test_demo_options_refuse_an_unknown_task():
    with pytest.raises(ValueError, match="unknown task 'partners'; valid: partner, corner"):
        DemoOptions(task='partners')
    proc = run_tool('demo.py', '--jobs', '0', check=False)
    assert proc.returncode == 2 and 'argument --jobs: expected an integer >= 1, got 0' in proc.stderr


def test_latency_table_rounds_of_one_block_per_mixer():
    """The demo's 1024x2048 table at toy size: the base and one block per mixer letter, median/min/max of rounds."""
    rounds = measure_interleaved('dinov3_vits16', (32, 64), repeat=3, warmup=0)
    assert list(rounds) == ['base', 'F', 'L', 'W']
    assert all(r['min'] <= r['median'] <= r['max'] for r in rounds.values())


def test_latency_table_times_the_alternatives_parts_in_the_same_rounds():
    from jetvit_mm.models.token_reduction import ClusterSpec

    rounds = measure_interleaved('dinov3_vits16', (64, 96), repeat=2, warmup=0,
                                 clusterings=[ClusterSpec(2, 3), ClusterSpec(2, 1)], small_model='dinov3_vits16')
    assert list(rounds) == ['base', 'F', 'L', 'W', 'F@f2', 'cluster f2', 'reconstruct f2', 'small base', 'small F']
    assert all(r['min'] <= r['median'] <= r['max'] for r in rounds.values())


@pytest.mark.integration
def test_demo_runs_end_to_end_reuses_its_teacher_and_repeats_its_table(tmp_path):
    """The README's main job at a few iterations per step: every tool of the pipeline runs, the outputs are
    written, and a second run in the same work dir reuses the trained teacher and gives the same table."""
    work = tmp_path / 'demo'
    tables = []
    for run in range(2):
        proc = run_tool('demo.py', '--work-dir', work, *TINY_DEMO)
        results = json.loads((work / 'results.json').read_text())
        assert results['teacher_cached'] == results['small_teacher_cached'] == (run == 1)
        assert ('teacher: cached' in proc.stdout) == ('teacher_small: cached' in proc.stdout) == (run == 1)
        # one workflow engine: a rerun skips every stage done with the same inputs (pipeline/ is kept)
        skipped = [f'{name}: done, skipped' in proc.stdout for name in ('step2_search', 'probe_hybrid', 'test_1F')]
        assert skipped == [run == 1] * 3
        tables.append([(r['tag'], r['arch'], r['mIoU'], r['search_mIoU']) for r in results['rows']])
    assert tables[0] == tables[1]
    archs = {tag: arch for tag, arch, _, _ in tables[0]}
    assert archs['teacher'] == 'F' * 12 and archs['all_L'] == 'L' * 12 and archs['all_W'] == 'W' * 12
    assert set(archs['step1']) <= set('LW') and archs['1F'].count('F') == 1 and archs['2F'].count('F') == 2
    assert archs['cluster_2F'] == archs['cluster_all_L'] == archs['teacher_small'] == 'F' * 12
    assert all(0 <= miou <= 100 for _, _, miou, _ in tables[0])
    for name in ('results.md', 'pareto_step1.png', 'pareto_step2.png', 'layer_gains_step1.png',
                 'layer_gains_step2.png'):
        assert (work / name).stat().st_size > 0, name
