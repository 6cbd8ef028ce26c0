"""Triton cases run in one fresh interpreter with ``TRITON_INTERPRET=1`` (triton takes its interpreter only if the
variable is set when it is imported; a process of its own also keeps it from every other test): the test file's
fixture starts ``python -m tests.<file>`` (:func:`interpreted`), whose ``__main__`` block reports each case
(:func:`report_cases`) as one JSON line, ``{case: None or its traceback}``."""
import json
import os
import subprocess
import sys
import traceback
import warnings
from typing import Callable, Dict, Optional

import pytest

from .conftest import HANG_GUARD_S, REPO


def interpreted(module: str) -> Dict[str, Optional[str]]:
    """The report of ``python -m tests.<module>`` under ``TRITON_INTERPRET=1``; a process that crashed fails."""
    pytest.importorskip('triton')
    proc = subprocess.run([sys.executable, '-m', f'tests.{module}'], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, TRITON_INTERPRET='1'), timeout=HANG_GUARD_S)
    assert proc.returncode == 0, f'the interpreter process ended with {proc.returncode}: {proc.stderr[-4000:]}'
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report_cases(cases: Dict[str, Callable[[], None]], before: Callable[[], None] = lambda: None) -> None:
    """Run each case (``before`` first, each time) and print the report; a fast kernel's fallback fails its case."""
    warnings.filterwarnings('error', message='jetvit_mm: the fast kernel')
    results = {}
    for name, case in cases.items():
        before()
        try:
            case()
            results[name] = None
        except Exception:  # reported, with its traceback, by that case's test
            results[name] = traceback.format_exc()
    print(json.dumps(results))
