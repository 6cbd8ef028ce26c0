"""Benchmarks (pure torch + timm): the one interleaved timer, the mixer and whole-model benchmarks with their
documented targets, FLOPs with attention counted, peak memory of a forward in a fresh process."""
from .flops import FlopCounter, count_flops
from .timing import summarize, time_interleaved

__all__ = ['FlopCounter', 'count_flops', 'summarize', 'time_interleaved']
