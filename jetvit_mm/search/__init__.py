"""Search: pure functions and small classes over arch strings (no mmengine)."""
from .beam import (
    BeamStage,
    SearchResult,
    Stop,
    beam_search,
    search_step1,
    search_step2,
    step1_moves,
    step1_order,
    step1_start,
    step2_moves,
)
from .sampler import SAMPLER_MODES, SupernetSampler

__all__ = ['SAMPLER_MODES', 'SearchResult', 'BeamStage', 'Stop', 'SupernetSampler', 'beam_search', 'search_step1',
           'search_step2', 'step1_moves', 'step1_order', 'step1_start', 'step2_moves']
