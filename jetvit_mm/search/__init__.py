"""Search: pure functions and small classes over arch strings (no mmengine)."""
from .sampler import SAMPLER_MODES, SupernetSampler

__all__ = ['SAMPLER_MODES', 'SupernetSampler']
