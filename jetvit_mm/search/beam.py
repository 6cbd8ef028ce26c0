"""Stage-wise beam search over arch strings: a pure function of (start, moves, score, cost, seed).

Scores are "higher is better" (negate a lower-is-better metric before); a NaN or infinite one ranks below every
finite one (with a warning), never reordering them.
"""
import math
import random
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence

Score = Callable[[str], float]


@dataclass
class BeamStage:
    """One stage of the search: the archs it scored and the beam it kept."""

    index: int
    candidates: List[str]
    beam: List[str]
    best_arch: str
    best_score: float


@dataclass
class SearchResult:
    best_arch: str
    best_score: float
    stop_reason: str
    stages: List[BeamStage] = field(default_factory=list)
    scores: Dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Stop:
    """Why a search stopped, and what its result is: with ``keep_last=False`` the final stage's moves are not kept
    (a plateau: they gained too little); with ``last_best=True`` the result is the final stage's best (Step 2 on
    reaching its target: the fewest F that do), else the best arch of the kept stages."""

    reason: str
    keep_last: bool = True
    last_best: bool = False


def _ranked(score: float) -> float:
    """The score as ranked: NaN and infinities below every finite score."""
    return score if math.isfinite(score) else -math.inf


def step1_moves(arch: str, order: str = 'LW', search_space: Optional[Sequence[str]] = None) -> List[str]:
    """Move one layer to a dearer kind: any letter after its own in ``order`` (cheapest first) that is one of
    the layer's candidates in ``search_space`` (default: every letter of ``order``). Default: turn one L into W."""
    moves = []
    for i, letter in enumerate(arch):
        candidates = order if search_space is None else search_space[i]
        dearer = order[order.index(letter) + 1:] if letter in order else ''
        moves += [arch[:i] + kind + arch[i + 1:] for kind in dearer if kind in candidates]
    return moves


def step1_start(order: str, search_space: Sequence[str]) -> str:
    """Step 1's first arch: every layer at its cheapest candidate by ``order``."""
    start = []
    for i, options in enumerate(search_space):
        known = [letter for letter in order if letter in options]
        if not known or set(options) - set(order):
            raise ValueError(f'layer {i}: candidates {options!r} are not all in the step-1 order {order!r}')
        start.append(known[0])
    return ''.join(start)


def step1_order(letters: Iterable[str], latency: Optional[Dict[str, float]] = None,
                order: Optional[str] = None) -> str:
    """The efficient kinds ``letters`` (F excluded) from the cheapest to the dearest: ``order`` as the user gives it
    (checked to hold each of them once), else by ``latency`` (ms per block; ties keep the declaration order), else
    in declaration order."""
    kinds = ''.join(dict.fromkeys(letter for letter in letters if letter != 'F'))
    if order is not None:
        if not isinstance(order, str) or sorted(order) != sorted(kinds):
            raise ValueError(f'step-1 order {order!r} must list each efficient kind of the search space once, '
                             f'cheapest first: a permutation of {kinds!r}')
        return order
    if latency is not None:
        missing = [k for k in kinds if k not in latency]
        if missing:
            raise ValueError(f'the latency table has no entry for {missing}: it cannot order the step-1 kinds '
                             f'{kinds!r}; give an order')
        return ''.join(sorted(kinds, key=lambda k: (latency[k], kinds.index(k))))
    return kinds


def step2_moves(arch: str) -> List[str]:
    """Turn one non-F layer into F."""
    return [arch[:i] + 'F' + arch[i + 1:] for i, letter in enumerate(arch) if letter != 'F']


def beam_search(start: str, moves: Callable[[str], Iterable[str]], score: Score,
                stop: Callable[[BeamStage, Optional[BeamStage]], Optional[Stop]], beam_width: int = 4,
                cost: Optional[Callable[[str], float]] = None, budget: Optional[float] = None, seed: int = 0,
                scores: Optional[Dict[str, float]] = None) -> SearchResult:
    """Search from ``start``; each stage expands every beam member by ``moves`` and keeps the ``beam_width`` best.

    Args:
        score: arch -> score, called once per arch: results are memoised in ``scores``.
        stop: ``(stage, previous stage) -> Stop or None``, asked after every stage (also after stage 0).
        cost: arch -> predicted cost (latency); ties in score go to the cheaper arch, then to fewer F layers.
        budget: archs with ``cost > budget`` are never scored.
        seed: order in which a stage's candidates are scored (ties beyond cost are broken by this order).
        scores: memo of already scored archs (a resumed search passes its saved scores).
    """
    if beam_width < 1:
        raise ValueError(f'beam_width must be >= 1, got {beam_width}')
    memo = scores if scores is not None else {}
    rng = random.Random(seed)
    warned = set()

    def affordable(arch: str) -> bool:
        return budget is None or cost is None or cost(arch) <= budget

    def key(arch: str, order: int):
        return -_ranked(memo[arch]), cost(arch) if cost else 0., arch.count('F'), order

    def rank(archs: Sequence[str]) -> List[str]:
        for arch in archs:
            if arch not in memo:
                memo[arch] = float(score(arch))
            if not math.isfinite(memo[arch]) and arch not in warned:
                warned.add(arch)
                warnings.warn(f'arch {arch} scored {memo[arch]}: ranked below every finite score', stacklevel=3)
        return [a for _, a in sorted((key(a, i), a) for i, a in enumerate(archs))]

    if not affordable(start):
        raise ValueError(f'the start arch {start!r} costs {cost(start):.4g} > budget {budget:.4g}: no arch is allowed')
    stage = BeamStage(0, [start], [start], start, 0.)
    stage.best_score = memo[rank([start])[0]]
    stages, previous = [stage], None
    decision = stop(stage, previous)
    while decision is None:
        candidates = sorted({m for arch in stage.beam for m in moves(arch)} - set(memo_seen(stages)))
        candidates = [a for a in candidates if affordable(a)]
        if not candidates:
            decision = Stop('no move left' if budget is None else 'no move left within the latency budget')
            break
        rng.shuffle(candidates)
        ranked = rank(candidates)
        previous, stage = stage, BeamStage(stage.index + 1, candidates, ranked[:beam_width], ranked[0], memo[ranked[0]])
        stages.append(stage)
        decision = stop(stage, previous)
    kept = stages if decision.keep_last or len(stages) == 1 else stages[:-1]
    if decision.last_best:
        best = kept[-1].best_arch
    else:
        seen = memo_seen(kept)
        best = min(seen, key=lambda a: key(a, seen.index(a)))
    return SearchResult(best, memo[best], decision.reason, stages, {a: memo[a] for a in memo_seen(stages)})


def memo_seen(stages: List[BeamStage]) -> List[str]:
    """Every arch scored so far by these stages, in scoring order."""
    out: List[str] = []
    for stage in stages:
        out.extend(a for a in stage.candidates if a not in out)
    return out


def plateau_stop(min_gain: float, max_stages: Optional[int] = None):
    """Step 1: stop when a stage improves the best score by less than ``min_gain`` (its moves are then not kept), or
    after ``max_stages``. A stage whose best is not finite gains nothing."""
    def stop(stage: BeamStage, previous: Optional[BeamStage]) -> Optional[Stop]:
        if previous is not None:
            gain = _ranked(stage.best_score) - _ranked(previous.best_score)
            if not gain >= min_gain:  # also a NaN gain (both stages non-finite)
                return Stop(f'plateau: gain {gain:.4g} < min_gain {min_gain}', keep_last=False)
        if max_stages is not None and stage.index >= max_stages:
            return Stop(f'max_stages {max_stages} reached')
        return None
    return stop


def target_stop(target: Optional[float], max_full: Optional[int]):
    """Step 2: stop when the stage's best reaches ``target`` (teacher score - tolerance): the result is that best;
    or when it has ``max_full`` F layers: the result is the best arch scored."""
    def stop(stage: BeamStage, previous: Optional[BeamStage]) -> Optional[Stop]:
        if target is not None and _ranked(stage.best_score) >= target:
            return Stop(f'target reached: {stage.best_score:.4g} >= {target:.4g}', last_best=True)
        if max_full is not None and stage.best_arch.count('F') >= max_full:
            return Stop(f'max_full {max_full} F layers reached')
        return None
    return stop


def search_step1(score: Score, depth: int, beam_width: int = 4, min_gain: float = 0.0,
                 max_stages: Optional[int] = None, order: str = 'LW', search_space: Optional[Sequence[str]] = None,
                 **kwargs) -> SearchResult:
    """Step 1: from every layer at its cheapest kind (all-L by default), moves to dearer kinds (``order``, cheapest
    first; default L -> W) until the plateau; the best arch of the stages whose gain was kept wins.
    ``search_space``: the candidates per layer (default: ``order`` in every layer)."""
    if not math.isfinite(min_gain):
        raise ValueError(f'min_gain must be a finite number, got {min_gain}')
    space = tuple(search_space) if search_space is not None else (order,) * depth
    if len(space) != depth:
        raise ValueError(f'search space has {len(space)} layers, expected {depth}')
    start = step1_start(order, space)
    return beam_search(start, lambda arch: step1_moves(arch, order, space), score, plateau_stop(min_gain, max_stages),
                       beam_width, **kwargs)


def search_step2(score: Score, start: str, beam_width: int = 4, teacher_score: Optional[float] = None,
                 tolerance: float = 0.0, max_full: Optional[int] = None, **kwargs) -> SearchResult:
    """Step 2: from Step 1's best, non-F -> F moves until the teacher's score minus ``tolerance`` or ``max_full``.
    Reaching the target, the result is that stage's best (the fewest F that reach it), else the best arch scored."""
    if teacher_score is None and max_full is None:
        raise ValueError('Step 2 needs a stop rule: teacher_score (with tolerance) and/or max_full')
    if teacher_score is not None and not math.isfinite(teacher_score - tolerance):
        raise ValueError(f'Step 2 needs a finite target: teacher_score {teacher_score} - tolerance {tolerance}')
    target = None if teacher_score is None else teacher_score - tolerance
    return beam_search(start, step2_moves, score, target_stop(target, max_full), beam_width, **kwargs)
