"""Benchmark helpers (pure torch): FLOPs with attention counted, peak memory of a forward in a fresh process."""
from .flops import FlopCounter, count_flops

__all__ = ['FlopCounter', 'count_flops']
