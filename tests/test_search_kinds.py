"""The search over any set of kinds (issue 23, item 2): Step 1 among every declared letter except F from the
cheapest, k candidates per layer in the supernet, sampler, latency model, heat maps per kind, the letter -> type
table in checkpoints and export meta."""
import json

import pytest
import torch

from jetvit_mm.benchmark.archs import resolve_arch
from jetvit_mm.models import JetViT
from jetvit_mm.models.mixers import DEFAULT_MIXERS
from jetvit_mm.models.supernet import JetViTSupernet
from jetvit_mm.search import SupernetSampler, search_step1, step1_moves, step1_order, step1_start
from jetvit_mm.search.latency import latency_calls, predict_latency, read_latency_table
from jetvit_mm.search.report import layer_gains
from jetvit_mm.search.run import SearchSettings, open_state, plot_stage, run_stage, start_arch

from .conftest import REPO

PLUGIN = REPO / 'examples' / 'pooled_attention'
TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2)
FOUR = dict(DEFAULT_MIXERS, W=dict(type='WindowAttention', window_size=2), P=dict(type='PooledAttention'))


@pytest.fixture
def pooled(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN))
    import jetvit_pooled
    return jetvit_pooled


# ----------------------------------------------------------------------------- pure search
def test_step1_moves_go_to_every_dearer_kind_among_the_layer_candidates():
    assert step1_moves('LWL') == ['WWL', 'LWW']  # today's L -> W
    assert step1_moves('LPW', order='LPW') == ['PPW', 'WPW', 'LWW']
    assert step1_moves('LPW', order='LPW', search_space=('LW', 'LPW', 'LPW')) == ['WPW', 'LWW']
    assert step1_moves('WWW', order='LPW') == []


def test_step1_order_from_the_latency_table_or_the_user():
    assert step1_order('LWP', {'L': 3., 'W': 2., 'P': 2.5}) == 'WPL'
    assert step1_order('LWP', {'L': 2., 'W': 2., 'P': 2.}) == 'LWP'  # ties keep the declaration order
    assert step1_order('LWP') == 'LWP'
    assert step1_order('LWP', {'L': 1.}, order='PLW') == 'PLW'  # the user's order wins
    with pytest.raises(ValueError, match="a permutation of 'LWP'"):
        step1_order('LWP', order='LW')
    with pytest.raises(ValueError, match=r"no entry for \['P'\]"):
        step1_order('LWP', {'L': 1., 'W': 2.})
    assert step1_start('WPL', ('LWP', 'LP', 'L')) == 'WPL'
    with pytest.raises(ValueError, match="not all in the step-1 order"):
        step1_start('LW', ('LWP',))


def test_step1_over_three_kinds_starts_cheapest_and_moves_while_it_pays():
    gain = {'L': 0., 'P': 1., 'W': 1.5}

    def score(arch):  # P pays at layer 0, W at layer 2; other moves lose
        return sum(gain[c] if i in (0, 2) else -gain[c] for i, c in enumerate(arch))

    result = search_step1(score, 4, beam_width=2, min_gain=0.01, order='LPW')
    assert result.stages[0].best_arch == 'LLLL'
    for previous, stage in zip(result.stages, result.stages[1:]):
        expected = {m for arch in previous.beam for m in step1_moves(arch, 'LPW')}
        assert set(stage.candidates) <= expected
    assert result.best_arch == 'WLWL'
    panel = layer_gains(result.stages, result.scores, 4, kind='P')
    assert panel[0][0] == pytest.approx(1.) and panel[0][1] == pytest.approx(-1.)


class Scorer:
    def score_arch(self, arch):
        return float(sum(i + 1 for i, c in enumerate(arch) if c == 'P') - arch.count('W') + 3 * arch.count('F'))

    def teacher_score(self):
        return 20.


def test_run_stage_over_three_kinds_writes_counts_and_one_heat_map_panel_per_kind(tmp_path):
    table = {'base': 1., 'F': 10., 'L': 2., 'W': 3., 'P': 2.5}
    space = ('LWP',) * 4
    settings = SearchSettings(stage=1, metric='toy', higher_is_better=True, beam_width=2, min_gain=0.5,
                              order='latency')
    identity = dict(checkpoint='s.pth', metric='toy')
    state = open_state(tmp_path / 'state.json', 1, identity, False)
    start = start_arch(1, space, state, order='latency', latency_table=table)
    assert start == 'LLLL'  # L is the cheapest by the table
    out = run_stage(settings, Scorer(), start, state, tmp_path / 'state.json', identity, table, (64, 64),
                    progress=None, search_space=space)
    assert out.result.best_arch.count('P') >= 1
    saved = json.loads((tmp_path / 'state.json').read_text())['stages']['1']
    assert saved['order'] == 'LPW' and set(saved['layer_gains_by_kind']) == {'P', 'W'}
    records = json.loads((tmp_path / 'search.json').read_text())['archs']
    assert all(r['P'] == r['arch'].count('P') for r in records)
    paths = plot_stage(out, settings, tmp_path)
    from PIL import Image
    single = tmp_path / 'single.png'
    from jetvit_mm.search.report import plot_gains
    plot_gains(out.gains, single, 'one panel')
    assert Image.open(paths[1]).width > Image.open(single).width  # two panels side by side
    with pytest.raises(ValueError, match=r'step 1 needs an \{L, W\} supernet \(or any efficient kinds'):
        start_arch(1, ('LWP', 'LF', 'L', 'L'), state)


def test_two_kind_heat_map_title_names_the_move_the_order_made(tmp_path, monkeypatch):
    """Step 1 over {L, W} with W the cheaper kind moves W -> L; the heat map's title says so, not 'L into W'."""
    import jetvit_mm.search.run as run
    titles = []
    monkeypatch.setattr(run, 'plot_gains', lambda rows, path, title: titles.append(title))
    table = {'base': 1., 'F': 10., 'L': 3., 'W': 2.}
    space = ('LW',) * 3
    for order, expected in (('latency', 'gain of turning each W layer into L'),
                            (None, 'gain of turning each L layer into W')):
        settings = SearchSettings(stage=1, metric='toy', higher_is_better=True, beam_width=2, min_gain=0.5,
                                  order=order)
        identity = dict(checkpoint='s.pth', metric='toy')
        out_dir = tmp_path / str(order)
        out_dir.mkdir()
        state = open_state(out_dir / 'state.json', 1, identity, False)
        start = start_arch(1, space, state, order=order, latency_table=table)
        out = run_stage(settings, Scorer(), start, state, out_dir / 'state.json', identity, table, (64, 64),
                        progress=None, search_space=space)
        plot_stage(out, settings, out_dir)
        assert titles[-1] == expected


# ----------------------------------------------------------------------------- models
def test_supernet_holds_k_candidates_and_every_path_extracts(pooled):
    torch.manual_seed(0)
    supernet = JetViTSupernet(search_space='LWPF', mixers=FOUR, **TINY).eval()
    assert supernet.search_space == ('LWPF',) * 4
    assert sorted(supernet.blocks[0].attn.candidates) == ['F', 'L', 'P', 'W']
    default = JetViTSupernet(mixers=FOUR, **TINY)
    assert default.search_space == ('LWP',) * 4  # every declared letter except F
    x = torch.randn(1, 3, 64, 64)
    for arch in ('PLWF', 'PPPP', 'WFPL'):
        supernet.set_arch(arch)
        subnet = supernet.extract_subnet(arch).eval()
        assert isinstance(subnet.blocks[arch.index('P')].attn, pooled.PooledAttention)
        with torch.no_grad():
            assert torch.equal(supernet(x)[0], subnet(x)[0])
        assert subnet.spec.mixers['P'] == {'type': 'PooledAttention', 'pool_size': 2}
    sampler = SupernetSampler(supernet.search_space, seed=0)
    assert set(''.join(sampler.sample(i) for i in range(30))) == set('LWPF')
    budgeted = SupernetSampler(supernet.search_space, seed=0, mode='budgeted', max_full=1)
    assert all(budgeted.sample(i).count('F') <= 1 for i in range(30))
    assert set(''.join(budgeted.sample(i) for i in range(30))) == set('LWPF')


def test_latency_model_times_every_declared_letter(pooled, tmp_path):
    model = JetViT(mixers=FOUR, **TINY).eval()
    calls = latency_calls(model, torch.randn(1, 3, 64, 64))
    assert sorted(calls) == ['F', 'L', 'P', 'W', 'base']
    assert calls['P']().shape == (1, 5 + 16, 32)
    path = tmp_path / 't.json'
    path.write_text(json.dumps({'base': 1., 'F': 4., 'L': 2., 'W': 3.}))
    with pytest.raises(ValueError, match='for base, F, L, P, W'):
        read_latency_table(path, 'LWPF')
    with pytest.raises(ValueError, match=r"no entry for letter\(s\) \['P'\]"):
        predict_latency('LPF', {'base': 1., 'F': 4., 'L': 2., 'W': 3.})
    assert resolve_arch('all-P', 4, 'LWFP') == 'PPPP' and resolve_arch('LPWF', 4, 'LWFP') == 'LPWF'
    with pytest.raises(ValueError, match="'P' at layer 1"):
        resolve_arch('LPWF', 4)


def test_loading_into_a_model_with_another_table_is_refused_naming_the_difference(pooled, tmp_path):
    from jetvit_mm.models.mixers import register_mixer
    from jetvit_mm.models.mixers.full import FullAttention

    @register_mixer(name='TestOtherP', force=True)
    class OtherP(FullAttention):
        pass

    model = JetViT(arch='PLWF', mixers=FOUR, **TINY)
    torch.save(model.state_dict(), tmp_path / 'p.pth')
    other = dict(FOUR, P=dict(type='TestOtherP'))
    with pytest.raises(ValueError, match=r"'P' is PooledAttention, but this model's 'P' is TestOtherP: declare "
                                         r"mixers.P=dict\(type='PooledAttention', ...\)"):
        JetViT(arch='PLWF', mixers=other, checkpoint=tmp_path / 'p.pth', **TINY)
    with pytest.raises(ValueError, match=r'mixers.P.pool_size=2'):
        JetViT(arch='PLWF', mixers=dict(FOUR, P=dict(type='PooledAttention', pool_size=3)),
               checkpoint=tmp_path / 'p.pth', **TINY)
    JetViT(arch='PLWF', mixers=FOUR, checkpoint=tmp_path / 'p.pth', **TINY)  # the same table loads


# ----------------------------------------------------------------------------- per-kind gains (issue 29, item 3)
# layer -> kind -> what moving that layer to that kind adds; the search's stages (beam 2, from LL, order LPW):
# 1: PL 1.0, LP 0.9, WL 0.6, LW 0.3 -> PL; 2 (from PL, LP; WL and LW already scored): PP 1.9, WP 1.5, PW 1.3 -> PP;
# 3 (from PP, WP): WW 0.9 -> plateau
THREE_KINDS = ({'L': 0., 'P': 1.0, 'W': 0.6}, {'L': 0., 'P': 0.9, 'W': 0.3})


class ThreeKinds:
    def score_arch(self, arch):
        return sum(THREE_KINDS[i][c] for i, c in enumerate(arch))

    def teacher_score(self):
        return 5.


def three_kind_search(tmp_path, seed):
    table = {'base': 1., 'F': 10., 'L': 2., 'P': 2.5, 'W': 3.}
    settings = SearchSettings(stage=1, metric='toy', higher_is_better=True, beam_width=2, min_gain=0.,
                              order='LPW', seed=seed)
    work = tmp_path / f'seed{seed}'
    state = open_state(work / 'state.json', 1, dict(metric='toy'), False)
    outcome = run_stage(settings, ThreeKinds(), 'LL', state, work / 'state.json', dict(metric='toy'), table,
                        (64, 64), out_dir=work, progress=None, search_space=('LPW',) * 2)
    return outcome, json.loads((work / 'search.json').read_text())


def test_per_kind_gains_in_search_json_hold_only_that_kind_and_reuse_earlier_stages(tmp_path):
    outcome, summary = three_kind_search(tmp_path, seed=0)
    assert summary['best']['1']['arch'] == 'PP'
    assert [s.best_arch for s in outcome.result.stages] == ['LL', 'PL', 'PP', 'WW']
    by_kind = summary['layer_gains_by_kind']['1']
    assert set(by_kind) == {'P', 'W'}
    approx = lambda rows: [[None if g is None else pytest.approx(g) for g in row] for row in rows]  # noqa: E731
    # P: LL -> PL, LP; PL -> PP (layer 0 is P already); PP: no P move left
    assert by_kind['P'] == approx([[1.0, 0.9], [None, 0.9], [None, None]])
    # W: LL -> WL, LW; PL -> WL (scored in stage 1, not again in stage 2), PW; PP -> WP, PW (both scored in stage 2)
    assert by_kind['W'] == approx([[0.6, 0.3], [-0.4, 0.3], [-0.4, -0.6]])
    assert summary['layer_gains']['1'] == approx([[1.0, 0.9], [-0.4, 0.9], [-0.4, -0.6]])  # each layer's best move
    # the heat map draws what search.json holds: the stage-1 W move shows in the stage-2 and stage-3 panels
    assert {k: [[None if g != g else g for g in row] for row in rows]
            for k, rows in outcome.gains_by_kind.items()} == by_kind


def test_per_layer_gains_do_not_depend_on_the_seed(tmp_path):
    """The candidates are scored in a shuffled order; the gains must not take whichever move came first."""
    outcomes = [three_kind_search(tmp_path, seed)[1] for seed in range(6)]
    assert all(o['best'] == outcomes[0]['best'] for o in outcomes)  # the same search: its scores have no ties
    for key in ('layer_gains', 'layer_gains_by_kind'):
        assert all(o[key] == outcomes[0][key] for o in outcomes), key
