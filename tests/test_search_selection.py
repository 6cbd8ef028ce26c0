"""The search's selection rules on toy scores (issue 21's defects) and the resumable driver with a toy scorer: pure,
milliseconds, no mmengine."""
import json
import random

import pytest

from jetvit_mm.search import search_step1, search_step2
from jetvit_mm.search.run import SearchSettings, open_state, run_stage, start_arch

from .conftest import run_tool

NAN = float('nan')


def by_table(table):
    """A score function reading ``table`` (arch -> score)."""
    return lambda arch: table[arch]


# ----------------------------------------------------------------------------- Step 2's result
def test_step2_without_reaching_the_target_returns_the_best_scored_arch():
    """70 / 72 / 71 for 0 / 1 / 2 F and max_full=2: the 72 arch with 1 F, not the last stage's 71 with 2 F."""
    table = {'LL': 70., 'FL': 72., 'LF': 69., 'FF': 71.}
    result = search_step2(by_table(table), 'LL', beam_width=2, teacher_score=80., tolerance=0.5, max_full=2)
    assert result.stop_reason.startswith('max_full') and (result.best_arch, result.best_score) == ('FL', 72.)
    # the same when the moves run out (no max_full), and under a latency budget that ends the search
    assert search_step2(by_table(table), 'LL', teacher_score=80.).best_arch == 'FL'
    cost = lambda arch: 1. + 10. * arch.count('F')  # noqa: E731
    budgeted = search_step2(by_table(table), 'LL', teacher_score=80., cost=cost, budget=15.)
    assert budgeted.stop_reason.startswith('no move left within') and budgeted.best_arch == 'FL'
    # reaching the target, the result is the stage that reached it: the fewest F that do
    reached = search_step2(by_table(table), 'LL', teacher_score=72., tolerance=0.5)
    assert reached.stop_reason.startswith('target reached') and reached.best_arch == 'FL'
    # a tie in score goes to fewer F
    tie = search_step2(by_table(dict(table, FF=72.)), 'LL', teacher_score=80.)
    assert tie.best_arch == 'FL'


def test_step2_never_returns_an_arch_beaten_by_one_with_more_score_and_fewer_full_layers():
    rng = random.Random(0)
    for trial in range(300):
        depth, scores = rng.randint(2, 5), {}

        def score(arch, scores=scores):
            return scores.setdefault(arch, rng.choice([rng.uniform(0, 10), float(rng.randint(0, 5))]))
        result = search_step2(score, 'W' * depth, beam_width=rng.randint(1, 3), teacher_score=rng.uniform(5, 12),
                              max_full=rng.choice([None, 1, 2]))
        beaten = [a for a, v in result.scores.items()
                  if v > result.best_score and a.count('F') < result.best_arch.count('F')]
        assert not beaten, (trial, result.best_arch, result.best_score, beaten)


# ----------------------------------------------------------------------------- NaN and infinite scores
def test_non_finite_scores_rank_last_and_never_reorder_the_finite_ones():
    """One NaN candidate made beam 1 keep 59 over 61."""
    table = {'LLL': 50., 'WLL': 59., 'LWL': NAN, 'LLW': 61., 'WLW': 40., 'LWW': 45.}
    with pytest.warns(UserWarning, match=r'arch LWL scored nan: ranked below every finite score'):
        result = search_step1(by_table(table), 3, beam_width=1, min_gain=0.5)
    assert result.stages[1].beam == ['LLW'] and result.stages[1].best_score == 61.
    assert result.best_arch == 'LLW' and result.stop_reason.startswith('plateau')
    for bad in (float('inf'), float('-inf')):
        with pytest.warns(UserWarning, match='ranked below every finite score'):
            assert search_step1(by_table(dict(table, LWL=bad)), 3, beam_width=1, min_gain=0.5).best_arch == 'LLW'


def test_non_finite_scores_never_keep_the_stop_rules_from_firing():
    with pytest.warns(UserWarning):  # a stage of nothing but NaN gains nothing: the plateau rule ends Step 1
        stuck = search_step1(by_table({'LLL': 1., 'WLL': NAN, 'LWL': NAN, 'LLW': NAN}), 3, min_gain=-1e9)
    assert stuck.stop_reason.startswith('plateau') and stuck.best_arch == 'LLL' and len(stuck.stages) == 2
    with pytest.warns(UserWarning):  # Step 2 still stops at max_full, on the best finite arch
        capped = search_step2(lambda arch: NAN if arch.count('F') else 1., 'LLL', teacher_score=2., max_full=1)
    assert capped.stop_reason.startswith('max_full') and capped.best_arch == 'LLL'
    with pytest.raises(ValueError, match='needs a finite target'):
        search_step2(by_table({}), 'LLL', teacher_score=NAN)


# ----------------------------------------------------------------------------- Step 1's plateau
def test_step1_keeps_no_move_whose_gain_is_below_min_gain():
    """60 -> 62 -> 62.05 with min_gain 0.1: the second W gains 0.05 and is not kept."""
    table = {'LL': 60., 'WL': 62., 'LW': 61., 'WW': 62.05}
    result = search_step1(by_table(table), 2, beam_width=2, min_gain=0.1)
    assert result.stop_reason.startswith('plateau: gain 0.05') and (result.best_arch, result.best_score) == ('WL', 62.)
    assert len(result.stages) == 3 and 'WW' in result.scores  # scored and reported, just not kept
    assert search_step1(by_table(table), 2, beam_width=2, min_gain=0.01).best_arch == 'WW'
    with pytest.raises(ValueError, match='min_gain must be a finite number'):
        search_step1(by_table(table), 2, min_gain=NAN)


@pytest.mark.integration
def test_tolerance_help_says_what_a_negative_value_does():
    text = ' '.join(run_tool('search.py', '--help').stdout.split())
    assert "A negative tolerance puts the target above the teacher's score" in text
    assert 'beats the teacher by |tolerance|' in text


# ----------------------------------------------------------------------------- the resumable driver
WEIGHTS = [0.5, 0.1, 0.3, 0.05, 0.0, 0.2]
TABLE = {'base': 1., 'F': 10., 'L': 2., 'W': 3.}


class ToyScorer:
    """``score_arch`` / ``teacher_score`` as the driver asks them; after ``fail_after`` scores it is killed."""

    def __init__(self, fail_after=None):
        self.calls, self.fail_after = [], fail_after

    def score_arch(self, arch):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt('killed')
        self.calls.append(arch)
        w = sum(WEIGHTS[i] for i, c in enumerate(arch) if c == 'W') - 0.3 * max(0, arch.count('W') - 3)
        return 10 * (w + sum(0.3 * (i + 1) / len(arch) for i, c in enumerate(arch) if c == 'F')
                     - 0.05 * arch.count('F') ** 2)

    def teacher_score(self):
        return 15.


def run_toy(work, scorer, stage=1, resume=False, identity=None, **settings):
    settings = SearchSettings(stage=stage, metric='toy', higher_is_better=True, beam_width=2, **settings)
    identity = identity or dict(checkpoint='supernet.pth', metric='toy')
    state = open_state(work / 'search_state.json', stage, identity, resume)
    best1 = state['stages'].get('1', {}).get('best_arch', '')
    space = ('LW',) * 6 if stage == 1 else tuple(c if c == 'F' else c + 'F' for c in best1)
    return run_stage(settings, scorer, start_arch(stage, space, state), state, work / 'search_state.json', identity,
                     TABLE, (64, 64), progress=None)


def test_search_driver_resumes_a_killed_stage_without_rescoring(tmp_path):
    whole = run_toy(tmp_path / 'whole', ToyScorer(), min_gain=0.01)
    assert whole.summary['best']['1']['arch'] == whole.result.best_arch
    with pytest.raises(KeyboardInterrupt):
        run_toy(tmp_path / 'killed', ToyScorer(fail_after=4), min_gain=0.01)
    partial = json.loads((tmp_path / 'killed' / 'search_state.json').read_text())['stages']['1']
    assert len(partial['scores']) == 4
    with pytest.raises(FileExistsError, match='pass --resume'):
        run_toy(tmp_path / 'killed', ToyScorer(), min_gain=0.01)
    with pytest.raises(ValueError, match='was written for supernet.pth / toy'):
        run_toy(tmp_path / 'killed', ToyScorer(), resume=True, identity=dict(checkpoint='other.pth', metric='toy'),
                min_gain=0.01)
    rest = ToyScorer()
    resumed = run_toy(tmp_path / 'killed', rest, resume=True, min_gain=0.01)
    assert rest.calls and not set(rest.calls) & set(partial['scores'])  # nothing scored twice
    assert resumed.result.best_arch == whole.result.best_arch and resumed.summary['archs'] == whole.summary['archs']
    assert (tmp_path / 'killed' / 'best_arch_step1.txt').read_text().strip() == whole.result.best_arch
    # step 2 starts from step 1's best in the state, towards the teacher's score
    step2 = run_toy(tmp_path / 'killed', ToyScorer(), stage=2, tolerance=0.5, max_full=2)
    assert step2.result.best_arch.count('F') <= 2 and {r['stage'] for r in step2.summary['archs']} == {1, 2}
    assert all(a == 'F' or a == b for a, b in zip(step2.result.best_arch, whole.result.best_arch))
    saved = json.loads((tmp_path / 'killed' / 'search.json').read_text())
    assert saved['best']['2']['arch'] == step2.result.best_arch and saved['teacher_score'] == 15.


def test_search_driver_checks_before_scoring(tmp_path):
    scorer = ToyScorer()
    with pytest.raises(ValueError, match='latency budget 5.0 ms is impossible'):
        run_toy(tmp_path, scorer, latency_budget=5.)
    assert not scorer.calls and not (tmp_path / 'search_state.json').exists()
    with pytest.raises(ValueError, match=r'step 1 needs an \{L, W\} supernet'):
        start_arch(1, ('LW', 'WF'), {'stages': {}})
    with pytest.raises(ValueError, match='step 2 needs --step1-arch'):
        start_arch(2, ('LF', 'WF'), {'stages': {}})
    with pytest.raises(ValueError, match='does not match step 1 arch'):
        start_arch(2, ('LF', 'WF'), {'stages': {}}, step1_arch='WL')
    for bad in (dict(min_gain=NAN), dict(tolerance=float('inf')), dict(max_full=-1), dict(stage=3)):
        with pytest.raises(ValueError):
            SearchSettings(**{**dict(stage=1, metric='m', higher_is_better=True), **bad})
