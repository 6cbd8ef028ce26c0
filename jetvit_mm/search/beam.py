"""Stage-wise beam search over arch strings: a pure function of (start, moves, score, cost, seed).

Step 1 starts all-L and turns one L into W per stage until the gain plateaus; Step 2 starts from Step 1's
best and turns one non-F layer into F per stage until the score reaches the teacher's (minus a tolerance)
or ``max_full`` F layers. Scores are "higher is better" (negate a lower-is-better metric before).
"""
import random
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional

Score = Callable[[str], float]


@dataclass
class Stage:
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
    stages: List[Stage] = field(default_factory=list)
    scores: Dict[str, float] = field(default_factory=dict)


def step1_moves(arch: str) -> List[str]:
    """Turn one L into W."""
    return [arch[:i] + 'W' + arch[i + 1:] for i, letter in enumerate(arch) if letter == 'L']


def step2_moves(arch: str) -> List[str]:
    """Turn one non-F layer into F."""
    return [arch[:i] + 'F' + arch[i + 1:] for i, letter in enumerate(arch) if letter != 'F']


def beam_search(
        start: str,
        moves: Callable[[str], Iterable[str]],
        score: Score,
        stop: Callable[[Stage, Optional[Stage]], Optional[str]],
        beam_width: int = 4,
        cost: Optional[Callable[[str], float]] = None,
        budget: Optional[float] = None,
        seed: int = 0,
        scores: Optional[Dict[str, float]] = None,
        select: str = 'best',
) -> SearchResult:
    """Search from ``start``; each stage expands every beam member by ``moves`` and keeps the ``beam_width`` best.

    Args:
        start: the first arch (scored first).
        moves: arch -> neighbour archs of the next stage.
        score: arch -> score (higher is better). Called once per arch: results are memoised in ``scores``.
        stop: ``(stage, previous stage) -> reason or None``, asked after every stage (also after stage 0).
        beam_width: archs kept per stage.
        cost: arch -> predicted cost (latency); ties in score go to the cheaper arch.
        budget: archs with ``cost > budget`` are never scored.
        seed: order in which a stage's candidates are scored (ties beyond cost are broken by this order).
        scores: memo of already scored archs (a resumed search passes its saved scores).
        select: ``'best'``: the best arch seen; ``'last'``: the best arch of the final stage.
    """
    if beam_width < 1:
        raise ValueError(f'beam_width must be >= 1, got {beam_width}')
    if select not in ('best', 'last'):
        raise ValueError(f"select must be 'best' or 'last', got {select!r}")
    memo = scores if scores is not None else {}
    rng = random.Random(seed)

    def affordable(arch: str) -> bool:
        return budget is None or cost is None or cost(arch) <= budget

    def rank(archs: List[str]) -> List[str]:
        for arch in archs:
            if arch not in memo:
                memo[arch] = float(score(arch))
        order = {arch: i for i, arch in enumerate(archs)}
        return sorted(archs, key=lambda a: (-memo[a], cost(a) if cost else 0., order[a]))

    if not affordable(start):
        raise ValueError(f'the start arch {start!r} costs {cost(start):.4g} > budget {budget:.4g}: no arch is allowed')
    stage = Stage(0, [start], [start], start, 0.)
    stage.best_score = memo[rank([start])[0]]
    stages, previous = [stage], None
    reason = stop(stage, previous)
    while reason is None:
        candidates = sorted({m for arch in stage.beam for m in moves(arch)} - set(memo_seen(stages)))
        candidates = [a for a in candidates if affordable(a)]
        if not candidates:
            reason = 'no move left' if budget is None else 'no move left within the latency budget'
            break
        rng.shuffle(candidates)
        ranked = rank(candidates)
        previous, stage = stage, Stage(stage.index + 1, candidates, ranked[:beam_width], ranked[0], memo[ranked[0]])
        stages.append(stage)
        reason = stop(stage, previous)
    seen = memo_seen(stages)
    if select == 'last':
        best = stage.best_arch
    else:
        best = sorted(seen, key=lambda a: (-memo[a], cost(a) if cost else 0., seen.index(a)))[0]
    return SearchResult(best, memo[best], reason, stages, {a: memo[a] for a in seen})


def memo_seen(stages: List[Stage]) -> List[str]:
    """Every arch scored so far by these stages, in scoring order."""
    out: List[str] = []
    for stage in stages:
        out.extend(a for a in stage.candidates if a not in out)
    return out


def plateau_stop(min_gain: float, max_stages: Optional[int] = None):
    """Step 1: stop when a stage improves the best score by less than ``min_gain`` (or after ``max_stages``)."""
    def stop(stage: Stage, previous: Optional[Stage]) -> Optional[str]:
        if previous is not None and stage.best_score - previous.best_score < min_gain:
            return f'plateau: gain {stage.best_score - previous.best_score:.4g} < min_gain {min_gain}'
        if max_stages is not None and stage.index >= max_stages:
            return f'max_stages {max_stages} reached'
        return None
    return stop


def target_stop(target: Optional[float], max_full: Optional[int]):
    """Step 2: stop when the stage's best reaches ``target`` (teacher score - tolerance) or has ``max_full`` F."""
    def stop(stage: Stage, previous: Optional[Stage]) -> Optional[str]:
        if target is not None and stage.best_score >= target:
            return f'target reached: {stage.best_score:.4g} >= {target:.4g}'
        if max_full is not None and stage.best_arch.count('F') >= max_full:
            return f'max_full {max_full} F layers reached'
        return None
    return stop


def search_step1(score: Score, depth: int, beam_width: int = 4, min_gain: float = 0.0,
                 max_stages: Optional[int] = None, **kwargs) -> SearchResult:
    """Step 1: from all-L, L -> W moves until the plateau; the best arch seen wins."""
    return beam_search('L' * depth, step1_moves, score, plateau_stop(min_gain, max_stages), beam_width, **kwargs)


def search_step2(score: Score, start: str, beam_width: int = 4, teacher_score: Optional[float] = None,
                 tolerance: float = 0.0, max_full: Optional[int] = None, **kwargs) -> SearchResult:
    """Step 2: from Step 1's best, non-F -> F moves until the teacher's score minus ``tolerance`` or ``max_full``.

    The result is the best arch of the last stage (the fewest F layers that reach the target).
    """
    if teacher_score is None and max_full is None:
        raise ValueError('Step 2 needs a stop rule: teacher_score (with tolerance) and/or max_full')
    target = None if teacher_score is None else teacher_score - tolerance
    return beam_search(start, step2_moves, score, target_stop(target, max_full), beam_width, select='last', **kwargs)
