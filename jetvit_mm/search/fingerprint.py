"""Content fingerprints of a search's inputs, so that a resumed search is known to score the same supernet, head and
evaluation protocol as the run it continues, wherever the files now lie (not their path strings)."""
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional

from jetvit_mm.models.checkpoint.integrity import file_digest

__all__ = ['file_digest', 'files_by_content', 'files_by_size', 'value_digest']


def value_digest(value: Any) -> str:
    """``'sha256:<hex>'`` of a JSON-able value (dict keys sorted; other objects by their text)."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(',', ':'))
    return 'sha256:' + hashlib.sha256(text.encode()).hexdigest()


def _replace_files(value: Any, replace: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _replace_files(v, replace) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_replace_files(v, replace) for v in value]
    if isinstance(value, (str, Path)) and str(value) and os.path.exists(value):
        return replace(Path(value))
    return value


def files_by_content(value: Any) -> Any:
    """``value`` (a config) with each string that names an existing file replaced by the digest of its bytes (an
    annotation file an evaluator reads) and each one naming a folder by ``'<folder>'`` (where a dataset lies is not
    what it holds: its samples are fingerprinted by :func:`files_by_size`)."""
    return _replace_files(value, lambda p: '<folder>' if p.is_dir() else {'file': file_digest(p)})


def files_by_size(value: Any, root: Optional[str] = None) -> Any:
    """``value`` (a dataset's sample list) with each string that names an existing file replaced by its path under
    ``root`` (its name, outside ``root``) and its size in bytes: the same dataset under another folder gives the same
    value, another file list or files of other sizes another, without reading the files."""
    base = Path(root).resolve() if root else None

    def replace(path: Path) -> Any:
        if path.is_dir():
            return '<folder>'
        resolved = path.resolve()
        name = str(resolved.relative_to(base)) if base and resolved.is_relative_to(base) else path.name
        return {'file': name, 'size': resolved.stat().st_size}

    return _replace_files(value, replace)
