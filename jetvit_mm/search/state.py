"""The search's state file: JSON, rewritten atomically after every scored arch."""
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict

from jetvit_mm.jsonio import read_json_file


def write_json_atomic(path: Path, data: Dict[str, Any]) -> None:
    """Write ``data`` to ``path`` so that a reader (or a killed writer) never sees a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + '.', suffix='.tmp')
    try:
        with os.fdopen(fd, 'w') as f:
            json.dump(data, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> Dict[str, Any]:
    """A search state (a JSON object), refused naming the file when it is truncated or not JSON."""
    return read_json_file(path, 'a search state (tools/search.py\'s search_state.json)')
