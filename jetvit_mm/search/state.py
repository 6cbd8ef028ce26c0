"""The search's state file: JSON, rewritten atomically after every scored arch."""
import json
from pathlib import Path
from typing import Any, Dict

from jetvit_mm.jsonio import read_json_file
from jetvit_mm.models.checkpoint.integrity import atomic_write


def write_json_atomic(path: Path, data: Dict[str, Any]) -> None:
    """Write ``data`` to ``path`` so that a reader (or a killed writer) never sees a partial file."""
    atomic_write(path, lambda f: f.write(json.dumps(data, indent=2).encode()))


def read_json(path: Path) -> Dict[str, Any]:
    """A search state (a JSON object), refused naming the file when it is truncated or not JSON."""
    return read_json_file(path, 'a search state (tools/search.py\'s search_state.json)')
