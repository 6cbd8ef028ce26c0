"""The one timer (jetvit_mm/benchmark/timing.py): interleaved rounds with a rotating start, warm-up dropped, the
adaptive minimum of the search's latency table, and the latency table built on it."""
import time

import pytest
import torch

from jetvit_mm.benchmark.timing import call_timer, summarize, time_interleaved
from jetvit_mm.models.mixers import default_mixers


class FakeClock:
    """A timer that records the order of the calls and gives each entry a fixed duration."""

    def __init__(self, ms: dict) -> None:
        self.ms, self.order = ms, []

    def __call__(self, fn) -> float:
        name = fn()
        self.order.append(name)
        return self.ms[name]


def named_calls(*names: str) -> dict:
    return {name: (lambda name=name: name) for name in names}


def test_rounds_rotate_the_start_and_drop_the_warmup():
    clock = FakeClock({'a': 1., 'b': 2., 'c': 3.})
    rounds = []
    samples = time_interleaved(named_calls('a', 'b', 'c'), warmup=1, repeat=3, timer=clock,
                               on_round=lambda done, warming: rounds.append((done, warming)))
    assert clock.order == list('abc' 'bca' 'cab' 'abc')  # round r starts at entry r mod 3
    assert samples == {'a': [1.] * 3, 'b': [2.] * 3, 'c': [3.] * 3}  # the warm-up round is not in the samples
    assert rounds == [(1, True), (2, False), (3, False), (4, False)]


def test_min_total_keeps_only_fast_entries_in_the_rounds():
    """The search's latency table: at least ``repeat`` samples, more for fast calls until they add up to
    ``min_total_ms``; a slow call is not run again once it is done."""
    clock = FakeClock({'fast': 1., 'slow': 100.})
    samples = time_interleaved(named_calls('fast', 'slow'), warmup=2, repeat=3, timer=clock, min_total_ms=20.,
                               max_repeat=500)
    assert len(samples['slow']) == 3 and len(samples['fast']) == 20
    assert clock.order.count('slow') == 2 + 3  # warm-up + its 3 samples, none more
    capped = time_interleaved(named_calls('fast', 'slow'), warmup=0, repeat=3, timer=FakeClock(clock.ms),
                              min_total_ms=1e9, max_repeat=7)
    assert len(capped['fast']) == 7 and len(capped['slow']) == 7


def test_time_interleaved_refuses_bad_settings():
    with pytest.raises(ValueError, match='repeat >= 1'):
        time_interleaved(named_calls('a'), warmup=0, repeat=0)
    with pytest.raises(ValueError, match='max_repeat'):
        time_interleaved(named_calls('a'), warmup=0, repeat=5, max_repeat=2)
    with pytest.raises(ValueError, match='min_total_ms needs max_repeat'):
        time_interleaved(named_calls('a'), warmup=0, repeat=1, min_total_ms=10.)
    with pytest.raises(ValueError, match='no calls'):
        time_interleaved({}, warmup=0, repeat=1)


def test_cpu_timer_measures_the_call_in_milliseconds():
    ms = call_timer('cpu')(lambda: time.sleep(0.02))
    assert 20. <= ms < 2000.
    stats = summarize({'x': [3., 1., 2.]})
    assert stats == {'x': {'median_ms': 2., 'min_ms': 1., 'max_ms': 3.}}


def test_latency_table_is_the_minimum_of_the_samples(monkeypatch):
    """measure_latency_table: the base and one block per mixer letter, each the minimum of its interleaved
    samples (at least ``repeat`` of them)."""
    import jetvit_mm.search.latency as latency
    from jetvit_mm.models.jetvit import JetViT

    model = JetViT('dinov3_vits16', arch='LW', embed_dim=32, depth=2, num_heads=2,
                   mixers=default_mixers(W=dict(window_size=4)))
    seen = {}
    real = latency.time_interleaved

    def spy(calls, warmup, repeat, device, **kwargs):
        out = real(calls, warmup, repeat, device, **kwargs)
        seen.update(out)
        return out

    monkeypatch.setattr(latency, 'time_interleaved', spy)
    table = latency.measure_latency_table(model, (32, 48), warmup=0, repeat=2)
    assert list(table) == ['base', 'F', 'L', 'W']
    assert all(len(seen[k]) >= 2 and table[k] == min(seen[k]) for k in table)
    assert torch.is_inference_mode_enabled() is False
