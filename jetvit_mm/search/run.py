"""The resumable two-stage search of a supernet: one stage's beam search, its state file and its outputs.

Pure: the arch scorer (the framework's evaluator behind ``score_arch`` / ``teacher_score``), the latency table and
the state path are given. Every scored arch is written to the state file right away (atomically), so a killed
search resumes without re-scoring anything; ``tools/search.py`` only wires a supernet and an evaluator to it.
"""
import math
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from .beam import SearchResult, search_step1, search_step2, step1_moves, step1_order, step1_start, step2_moves
from .latency import predict_latency
from .report import layer_gains, pareto_front, plot_gains, plot_pareto
from .state import read_json, write_json_atomic

__all__ = ['ArchScorer', 'SearchSettings', 'StageOutcome', 'open_state', 'plot_stage', 'run_stage', 'stage1_order',
           'start_arch']

# 2: inputs identified by content fingerprints; 3: also the inference mode, data preprocessor, head config, backbone
# arguments, metric direction and distillation objective (a version-2 state lacks them: its resume is refused)
STATE_VERSION = 3


class ArchScorer(Protocol):
    """What the search asks of an evaluator: the score of one arch of the supernet, and the teacher's."""

    def score_arch(self, arch: str) -> float: ...

    def teacher_score(self) -> float: ...


@dataclass(frozen=True)
class SearchSettings:
    """One stage's search: the metric (its direction) and the beam search's rules, in the metric's units."""

    stage: int
    metric: str
    higher_is_better: bool
    beam_width: int = 4
    min_gain: float = 0.0  # Step 1: a stage that gains less ends the search, its moves not kept
    tolerance: float = 0.0  # Step 2: stop at teacher score - tolerance
    max_full: Optional[int] = None  # Step 2: at most this many F layers
    latency_budget: Optional[float] = None  # ms: dearer archs are never scored
    seed: int = 0
    # Step 1's kinds, cheapest first: None = the declaration order (L, W), 'latency' = by the latency table, or
    # the letters themselves ('LPW')
    order: Optional[str] = None

    def __post_init__(self) -> None:
        if self.stage not in (1, 2):
            raise ValueError(f'stage must be 1 or 2, got {self.stage}')
        for name in ('min_gain', 'tolerance'):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f'{name} must be a finite number, got {getattr(self, name)}')
        if self.max_full is not None and self.max_full < 0:
            raise ValueError(f'max_full must be >= 0, got {self.max_full}')


@dataclass
class StageOutcome:
    """What a stage found: the search result, the summary written to ``search.json``, and the plotted data."""

    result: SearchResult
    summary: Dict[str, Any]
    points: Dict[str, Tuple[float, float]]  # arch -> (score, higher is better; predicted ms)
    gains: List[List[float]]
    teacher_point: Tuple[float, float]
    gains_by_kind: Optional[Dict[str, List[List[float]]]] = None  # Step 1 over > 2 kinds: per kind moved to
    moves: str = 'LW'  # the kind a layer moves from, then the kinds it moves to ('LW', 'WL', 'LPW'; Step 2: 'F')


def open_state(state_path: Path, stage: int, identity: Dict[str, Any], resume: bool,
               names: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The search state at ``state_path`` (a fresh one if there is none), checked before any work: a saved search
    of this stage continues only with ``resume``, and only with the same inputs (``identity``: values that identify
    them, e.g. content fingerprints; ``names``: what each key is, for the message naming what changed)."""
    state_path = Path(state_path)
    state = read_json(state_path) if state_path.is_file() else None
    if state is not None and not isinstance(state.get('stages'), dict):
        raise ValueError(f'{state_path} is not a search state (no "stages" object): it was not written by '
                         f'tools/search.py or was edited; delete it to start afresh or choose another --work-dir')
    if state is not None and not resume and not (state['stages'].get(str(stage)) or {}).get('scores'):
        state['stages'].pop(str(stage), None)  # a stage that scored nothing (a run that failed early) loses nothing
    if state is not None and not resume and str(stage) in state['stages']:
        raise FileExistsError(f'{state_path} already holds a step {stage} search: pass --resume to continue it '
                              f'or choose another --work-dir')
    state = state or dict(version=STATE_VERSION, stages={})
    saved = state['stages'].get(str(stage))
    changed = [k for k, v in identity.items() if saved is not None and saved.get(k, _MISSING) != v]
    if changed:
        names = names or {}
        was = ' / '.join(_short(saved.get(k, v)) for k, v in identity.items())
        what = '; '.join(f'{names.get(k, k)}: saved {_short(saved.get(k, "(not recorded)"))}, now {_short(identity[k])}'
                         for k in changed)
        raise ValueError(f'{state_path} was written for {was} ({" / ".join(identity)}); changed: {what}. Resuming '
                         f'would mix scores of different inputs: use another --work-dir for these inputs')
    return state


def stage1_order(search_space: Sequence[str], order: Optional[str] = None,
                 latency_table: Optional[Dict[str, float]] = None) -> str:
    """Step 1's kinds, cheapest first, for a supernet of ``search_space``: ``order`` (the letters, or
    ``'latency'``: by ``latency_table``), default the declaration order (the order of the candidates)."""
    letters = ''.join(dict.fromkeys(''.join(search_space)))
    if 'F' in letters:
        raise ValueError(f'step 1 needs an {{L, W}} supernet (or any efficient kinds: every declared letter except '
                         f'F); this one has {tuple(search_space)}')
    if order == 'latency':
        if latency_table is None:
            raise ValueError("step-1 order 'latency' needs a latency table")
        return step1_order(letters, latency_table)
    return step1_order(letters, order=order)


_MISSING = object()


def _short(value: Any) -> str:
    text = str(value)
    return text[:23] + '...' if text.startswith('sha256:') else text


def start_arch(stage: int, search_space: Sequence[str], state: Dict[str, Any],
               step1_arch: Optional[str] = None, order: Optional[str] = None,
               latency_table: Optional[Dict[str, float]] = None) -> str:
    """Where a stage starts, checked against the supernet's ``search_space``: Step 1 from every layer at its
    cheapest kind (:func:`stage1_order`; all L for an {L, W} supernet), Step 2 from ``step1_arch`` or Step 1's best
    in the state (a {winner, F} supernet)."""
    space = tuple(search_space)
    if stage == 1:
        return step1_start(stage1_order(space, order, latency_table), space)
    start = step1_arch or state['stages'].get('1', {}).get('best_arch')
    if start is None:
        raise ValueError('step 2 needs --step1-arch or a finished step 1 in the work dir')
    expected = tuple(letter if letter == 'F' else letter + 'F' for letter in start)
    if space != expected:
        raise ValueError(f'step 2 supernet space {space} does not match step 1 arch {start!r} (expected {expected})')
    return start


def run_stage(settings: SearchSettings, scorer: ArchScorer, start: str, state: Dict[str, Any], state_path: Path,
              identity: Dict[str, Any], latency_table: Dict[str, float], latency_size: Optional[Sequence[int]] = None,
              out_dir: Optional[Path] = None, progress: Optional[Callable[[str], None]] = print,
              search_space: Optional[Sequence[str]] = None, writer: bool = True) -> StageOutcome:
    """Run (or resume) one stage of the search from ``start``; ``state`` is rewritten to ``state_path`` after every
    scored arch. Into ``out_dir`` (default: the state's folder) go ``best_arch_step<k>.txt`` and ``search.json``
    (:func:`_summary`). ``writer=False``: another rank of a distributed search, which writes and prints nothing."""
    state_path = Path(state_path)
    out_dir = Path(out_dir) if out_dir is not None else state_path.parent
    save = partial(write_json_atomic, state_path, state) if writer else (lambda: None)
    progress = progress if writer else None
    cost = partial(predict_latency, table=latency_table)
    _check_budget(settings, start, cost, latency_table)
    stage_state = _stage_state(settings, state, identity, latency_table, latency_size)
    if 'teacher_score' not in stage_state:  # per stage: each stage may score with its own metric and head
        stage_state['teacher_score'] = float(scorer.teacher_score())
    save()
    score = _recording_scorer(settings, scorer, stage_state, save, progress)
    result, moves, kinds = _search(settings, score, start, stage_state, cost, latency_table, search_space)
    outcome = _record_result(settings, result, stage_state, state, cost, len(start), moves, kinds, latency_size)
    save()
    if writer:
        write_json_atomic(out_dir / 'search.json', outcome.summary)
        (out_dir / f'best_arch_step{settings.stage}.txt').write_text(result.best_arch + '\n')
    if progress is not None:
        progress(f'step {settings.stage}: best {result.best_arch} {settings.metric}={stage_state["best_score"]:.4f} '
                 f'(teacher {stage_state["teacher_score"]:.4f}), predicted {cost(result.best_arch):.1f} ms vs '
                 f'teacher {cost("F" * len(start)):.1f} ms; stop: {result.stop_reason}')
    return outcome


def _check_budget(settings: SearchSettings, start: str, cost: Callable[[str], float],
                  latency_table: Dict[str, float]) -> None:
    """Refuse a latency budget that even the start arch (the cheapest) exceeds."""
    if settings.latency_budget is not None and cost(start) > settings.latency_budget:
        raise ValueError(f'latency budget {settings.latency_budget} ms is impossible: the cheapest start arch '
                         f'{start!r} is predicted at {cost(start):.1f} ms (table: {latency_table})')


def _recording_scorer(settings: SearchSettings, scorer: ArchScorer, stage_state: Dict[str, Any],
                      save: Callable[[], None], progress: Optional[Callable[[str], None]]) -> Callable[[str], float]:
    """The function the beam search maximises: scores an arch, records it in ``stage_state`` and saves the state
    right away; lower-is-better metrics are negated."""
    higher = settings.higher_is_better

    def score(arch: str) -> float:
        value = float(scorer.score_arch(arch))
        stage_state['scores'][arch] = value
        stage_state['history'].append([arch, value, time.time()])
        save()
        if progress is not None:
            finite = [v for v in stage_state['scores'].values() if math.isfinite(v)]
            best = (max(finite) if higher else min(finite)) if finite else math.nan
            progress(f'[search step {settings.stage}] {len(stage_state["scores"]):4d} archs | scored {arch} = '
                     f'{value:.4f} | best so far {best:.4f}')
        return value if higher else -value

    return score


def _search(settings: SearchSettings, score: Callable[[str], float], start: str, stage_state: Dict[str, Any],
            cost: Callable[[str], float], latency_table: Dict[str, float],
            search_space: Optional[Sequence[str]]) -> Tuple[SearchResult, Callable[[str], List[str]], str]:
    """The stage's beam search from ``start``, the archs already in ``stage_state`` not scored again; returns the
    result, the stage's moves and the kinds a layer moves to."""
    sign, depth = (1. if settings.higher_is_better else -1.), len(start)
    common = dict(beam_width=settings.beam_width, cost=cost, budget=settings.latency_budget, seed=settings.seed,
                  scores={arch: sign * v for arch, v in stage_state['scores'].items()})
    if settings.stage == 2:
        result = search_step2(score, start, teacher_score=sign * stage_state['teacher_score'],
                              tolerance=settings.tolerance, max_full=settings.max_full, **common)
        return result, step2_moves, 'F'
    space = tuple(search_space) if search_space is not None else ('LW',) * depth
    order = stage1_order(space, settings.order, latency_table)
    if step1_start(order, space) != start:
        raise ValueError(f'step 1 starts from each layer\'s cheapest kind by the order {order!r}: '
                         f'{step1_start(order, space)!r}, not {start!r}')
    stage_state['order'] = order
    result = search_step1(score, depth, min_gain=settings.min_gain, order=order, search_space=space, **common)
    return result, partial(step1_moves, order=order, search_space=space), order[1:]  # kinds a layer moves to


def _record_result(settings: SearchSettings, result: SearchResult, stage_state: Dict[str, Any],
                   state: Dict[str, Any], cost: Callable[[str], float], depth: int,
                   moves: Callable[[str], List[str]], kinds: str,
                   latency_size: Optional[Sequence[int]]) -> StageOutcome:
    """The stage's best arch, stop reason and per-layer gains into ``stage_state``; the outcome and its summary."""
    sign = 1. if settings.higher_is_better else -1.
    stage_state.update(best_arch=result.best_arch, best_score=stage_state['scores'][result.best_arch],
                       stop_reason=result.stop_reason, stages=[[s.best_arch for s in result.stages]])
    points = {arch: (sign * v, cost(arch)) for arch, v in stage_state['scores'].items()}
    # Fig. 7's numbers: per search stage, the gain (positive = better) of each one-layer move (each layer's best
    # move; and per kind moved to), whichever stage of the search scored it; None: not scored
    scores = {a: v for a, (v, _) in points.items()}
    gains = layer_gains(result.stages, scores, depth, moves=moves)
    gains_by_kind = {kind: layer_gains(result.stages, scores, depth, kind, moves) for kind in kinds}
    stage_state['layer_gains'] = _nulls(gains)
    stage_state['layer_gains_by_kind'] = {k: _nulls(rows) for k, rows in gains_by_kind.items()}
    teacher_value = stage_state['teacher_score']
    summary = _summary(settings, state, points, cost, teacher_value, depth, latency_size)
    return StageOutcome(result, summary, points, gains, (sign * teacher_value, cost('F' * depth)),
                        gains_by_kind if len(kinds) > 1 else None,
                        moves='F' if settings.stage == 2 else stage_state['order'])


def _stage_state(settings: SearchSettings, state: Dict[str, Any], identity: Dict[str, Any],
                 latency_table: Dict[str, float], latency_size: Optional[Sequence[int]]) -> Dict[str, Any]:
    """This stage's record in ``state`` (a new one if it has none), with the thresholds in force."""
    key = str(settings.stage)
    stage_state = state['stages'].get(key) or dict(identity, higher_is_better=settings.higher_is_better, scores={},
                                                    history=[], latency_ms=dict(latency_table),
                                                    latency_size=list(latency_size or []))
    if settings.stage == 1:  # the thresholds in force (metric units), for the record
        stage_state['min_gain'] = settings.min_gain
    else:
        stage_state['tolerance'] = settings.tolerance
    state['stages'][key] = stage_state
    return stage_state


def _summary(settings: SearchSettings, state: Dict[str, Any], points: Dict[str, Tuple[float, float]],
             cost: Callable[[str], float], teacher_value: float, depth: int,
             latency_size: Optional[Sequence[int]]) -> Dict[str, Any]:
    """What ``search.json`` holds: every scored arch of every stage (score, predicted latency, letter counts, Pareto
    membership: this stage's ``points``), each stage's best and Fig. 7's per-layer gains."""
    key, stages = str(settings.stage), state['stages']
    front = pareto_front(points)
    letters = sorted(set('LWF').union(*(set(a) for st in stages.values() for a in st['scores'])))
    records = [dict(arch=a, score=v, predicted_latency_ms=cost(a), **{letter: a.count(letter) for letter in letters},
                    stage=int(k), pareto=(k == key and a in front))
               for k, st in stages.items() for a, v in st['scores'].items()]
    return dict(metric=settings.metric, higher_is_better=settings.higher_is_better, teacher_score=teacher_value,
                teacher_latency_ms=cost('F' * depth), latency_size=list(latency_size or []),
                best={k: dict(arch=st.get('best_arch'), score=st.get('best_score'),
                              stop_reason=st.get('stop_reason')) for k, st in stages.items()},
                layer_gains={k: st.get('layer_gains') for k, st in stages.items()},
                layer_gains_by_kind={k: st.get('layer_gains_by_kind') for k, st in stages.items()},
                archs=records)


def _nulls(rows: List[List[float]]) -> List[List[Optional[float]]]:
    """Gain rows for JSON: None where not scored."""
    return [[None if math.isnan(g) else g for g in row] for row in rows]


def plot_stage(outcome: StageOutcome, settings: SearchSettings, out_dir: Path) -> List[Path]:
    """``pareto_step<k>.png`` (score vs predicted latency) and ``layer_gains_step<k>.png`` (Fig. 7) in ``out_dir``."""
    out_dir = Path(out_dir)
    key = settings.stage
    pareto, gains = out_dir / f'pareto_step{key}.png', out_dir / f'layer_gains_step{key}.png'
    plot_pareto(outcome.points, pareto, settings.metric + ('' if settings.higher_is_better else ' (negated)'),
                teacher=outcome.teacher_point)
    if outcome.gains_by_kind:  # one panel per kind a layer moved to
        plot_gains(outcome.gains_by_kind, gains, 'gain of moving each layer to a dearer kind')
    elif key == 2:
        plot_gains(outcome.gains, gains, 'gain of turning each layer into F')
    else:  # Step 1 over two kinds, cheapest first: 'LW' by default, 'WL' where W is the cheaper
        plot_gains(outcome.gains, gains, f'gain of turning each {outcome.moves[0]} layer into {outcome.moves[-1]}')
    return [pareto, gains]
