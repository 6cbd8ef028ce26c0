"""The fingerprints of what a run read, in one place: of values, of files by their bytes or by path and size, and of
a data folder. A resumed search, the workflow's skipped stages and the demo's caches rely on them."""
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional, Sequence

from jetvit_mm.models.checkpoint.integrity import file_digest

__all__ = ['content_digest', 'file_digest', 'files_by_content', 'files_by_size', 'text_digest', 'tree_fingerprint',
           'value_digest']


def text_digest(text: str) -> str:
    """The sha256 hex digest of ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()


def value_digest(value: Any) -> str:
    """``'sha256:<hex>'`` of a JSON-able value (dict keys sorted; other objects by their text)."""
    return 'sha256:' + text_digest(json.dumps(value, sort_keys=True, default=str, separators=(',', ':')))


def content_digest(*parts: object) -> str:
    """A short hash of files (their bytes) and values (their text), in order: the key of a cached step."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.read_bytes() if isinstance(part, Path) else str(part).encode())
    return h.hexdigest()[:16]


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


def tree_fingerprint(root: Path, skip: Sequence[Path] = ()) -> str:
    """What identifies a data folder: every file under it (symlinks followed; not under ``skip``, e.g. a work dir
    inside it), by relative path, size and mtime (``os.stat``), hashed; cheap (no file is read). Not seen: a file
    rewritten with the same size whose mtime is set back."""
    h, count, seen = hashlib.sha256(), 0, set()
    skipped = {Path(p).resolve() for p in skip}
    for top, dirs, files in os.walk(root, followlinks=True):
        st = os.stat(top)
        if (st.st_dev, st.st_ino) in seen or Path(top).resolve() in skipped:  # a symlink loop, a skipped folder
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()
        for name in sorted(files):
            path = Path(top) / name
            try:
                st = path.stat()
            except OSError:  # a dangling link
                continue
            h.update(f'{path.relative_to(root).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n'.encode())
            count += 1
    return f'{count} files, sha256:{h.hexdigest()[:20]}'
