"""The demo (``tools/demo.py``): ``run`` (the method's stages on a generated task, with the demo's own rows after
them), ``context_seg`` (that task: numpy + PIL only, cheap to import), ``latency`` and ``report`` (its latency table
and report). The tests' dataset generators are in ``tests/fixtures/datasets.py``."""
