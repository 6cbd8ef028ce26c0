"""The demo: the whole JetViT pipeline on CPU on a generated task where global context matters, every step a tool
run as a user runs it (``tools/demo.py`` is its command line; what it runs and writes: that tool's help).

``pipeline.DemoRun`` wires the steps (``run_demo`` runs them), ``scheduler`` runs the tools as stages of the
workflow engine (``jetvit_mm.mm.workflow``: skipped when done, resumed when killed), ``checkpoints`` moves
weights between them, ``latency`` times DINOv3-B's blocks at 1024x2048 and ``report`` writes the table and the plots.
"""
from .pipeline import DemoOptions, run_demo

__all__ = ['DemoOptions', 'run_demo']
