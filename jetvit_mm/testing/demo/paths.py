"""Where the demo finds the tools it runs and its configs: the repository checkout this package lives in."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CONFIGS = REPO / 'configs' / 'demo'
TEACHER_CFG = CONFIGS / 'teacher_context_seg.py'
SMALL_TEACHER_CFG = CONFIGS / 'teacher_small_context_seg.py'
PROBE_CFG = CONFIGS / 'probe_context_seg.py'
DISTILL_CFG = CONFIGS / 'distill_supernet_context_seg.py'
FIXED_CFG = CONFIGS / 'distill_fixed_context_seg.py'
