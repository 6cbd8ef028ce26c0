"""The demo's generated context task (numpy + PIL only, cheap to import); the tests' dataset generators are in
``tests/fixtures/datasets.py``."""

from .context_seg import TASKS as CONTEXT_SEG_TASKS
from .context_seg import context_seg_sample, make_context_seg

__all__ = ['CONTEXT_SEG_TASKS', 'context_seg_sample', 'make_context_seg']
