"""What a stage folder holds and what the workflow records of it: its markers (``.stage.json`` when it succeeded,
``.stage_started.json`` when it started), the digests of the outputs a later stage reads (its products), the files
it did not write, and where its previous complete outputs wait while it runs again."""
import json
import os
from pathlib import Path
from typing import Dict, List, Optional

from jetvit_mm.models.checkpoint.integrity import file_digest

from .stage import Stage

MARKER = '.stage.json'  # written when a stage succeeded
STARTED = '.stage_started.json'  # written when it starts: a later run with the same fingerprint resumes it


def _own(name: str) -> bool:
    """The workflow's own bookkeeping files in a stage folder (markers and their temporary files)."""
    return any(name == m or name.startswith(m + '.tmp') for m in (MARKER, STARTED))


def folder_files(folder: Path) -> List[str]:
    """Every file under ``folder`` (relative, sorted), but the workflow's own markers; symlinks as files."""
    found = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        for name in files + [d for d in dirs if (Path(root) / d).is_symlink()]:
            if not (rel == Path('.') and _own(name)):
                found.append((rel / name).as_posix())
    return sorted(found)


def sha256_of(path: Path) -> str:
    return file_digest(path).split(':', 1)[1]


def product_record(path: Path) -> List:
    """``[size, mtime_ns, sha256]`` of a product, as its marker records it."""
    st = Path(path).stat()
    return [st.st_size, st.st_mtime_ns, sha256_of(path)]


def pointed(pointer: Path) -> Optional[Path]:
    """The file a pointer file's text names (absolute, or relative to the pointer's folder); None if unreadable."""
    try:
        text = pointer.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return (pointer.parent / text) if text else None


def product_key(path: Path, folder: Path) -> str:
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return path.relative_to(folder).as_posix() if folder in path.parents else str(path)


def record_products(stage: Stage) -> Dict[str, List]:
    """The digest of each product of a finished stage (the files ``products`` match, and those ``pointers`` name)."""
    out, found = Path(stage.out_dir), {}
    for pattern in stage.products:
        for path in sorted(out.glob(pattern)):
            if path.is_file():
                found[product_key(path, out)] = product_record(path)
    for name in stage.pointers:
        target = pointed(out / name)
        if target is not None and target.is_file():
            found[product_key(target, out)] = product_record(target)
    return found


def product_problems(folder: Path, marker: dict) -> Dict[str, str]:
    """What differs from the products a marker recorded, by product: missing, another size, other content (hashed
    only when the mtime changed). A marker written before products were recorded cannot be checked."""
    if 'products' not in marker:
        return {MARKER: 'records no outputs (written by an older version)'}
    problems = {}
    for name, (size, mtime_ns, digest) in marker['products'].items():
        path = Path(folder) / name
        try:
            st = path.stat()
        except OSError:
            problems[name] = 'is missing'
            continue
        if st.st_size != size:
            problems[name] = f'changed ({st.st_size} bytes, {size} when the stage finished)'
        elif st.st_mtime_ns != mtime_ns and sha256_of(path) != digest:
            problems[name] = 'changed (another content than when the stage finished)'
    return problems


def read_marker(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def foreign_files(folder: Path) -> List[str]:
    """The files of a stage folder the workflow did not write: all of them with no marker; those outside the
    manifest of outputs a marker recorded (a marker of an older version: those newer than it). A folder of a run
    that did not finish (a start marker, no marker) is the stage's own."""
    folder = Path(folder)
    if not folder.exists() and not folder.is_symlink():
        return []
    if not folder.is_dir():
        return [folder.name]
    files = folder_files(folder)
    marker = read_marker(folder / MARKER)
    if 'outputs' in marker:
        known = set(marker['outputs'])
        return [f for f in files if f not in known]
    if marker:
        return [f for f in files if (folder / f).lstat().st_mtime > float(marker.get('finished', 0))]
    return [] if (folder / STARTED).is_file() else files


def previous_dir(stage: Stage) -> Path:
    """Where a stage's previous complete outputs wait while it runs again."""
    return Path(stage.out_dir).with_name(f'.{Path(stage.out_dir).name}.previous')


