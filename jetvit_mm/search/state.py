"""The search's state file: JSON, rewritten atomically after every scored arch."""
from pathlib import Path
from typing import Any, Dict

from jetvit_mm.jsonio import read_json_file, write_json_atomic

__all__ = ['read_json', 'write_json_atomic']


def read_json(path: Path) -> Dict[str, Any]:
    """A search state (a JSON object), refused naming the file when it is truncated or not JSON."""
    return read_json_file(path, 'a search state (tools/search.py\'s search_state.json)')
