"""What identifies a stage's inputs (its fingerprint's parts): the configs it names with their bases merged, size and
mtime of the other files it names; data folders by :func:`jetvit_mm.fingerprints.tree_fingerprint`."""
import json
import re
import threading
import warnings
from pathlib import Path
from typing import Dict, Iterable, List, Optional

from jetvit_mm.fingerprints import text_digest

CONFIG_LOCK = threading.Lock()


def _config_text(path: Path) -> str:
    """A config with its ``_base_`` files merged (mmengine's reader), or its text when it has no bases or does not
    parse (a script: never executed here)."""
    text = path.read_text(errors='replace')
    if not re.search(r'^_base_\s*=', text, re.MULTILINE):  # a script that names _base_ is no config
        return text
    try:
        with CONFIG_LOCK, warnings.catch_warnings():  # mmengine's reader is not thread-safe (the demo's threads)
            warnings.simplefilter('ignore')
            from jetvit_mm.mm.engine.launch import read_config

            return json.dumps(read_config(str(path)).to_dict(), sort_keys=True, default=str)
    except Exception:  # not an mmengine config (or one that fails to parse: the tool will say why)
        return text


def file_fingerprint(path: Path) -> Optional[List]:
    """What identifies an input file: a config's merged text digest, size and mtime of anything else; None when
    ``path`` is no file."""
    try:
        if not path.is_file():
            return None
    except OSError:  # a name too long to be a path
        return None
    if path.suffix == '.py':
        return ['text', text_digest(_config_text(path))[:16]]
    st = path.stat()
    return ['stat', st.st_size, st.st_mtime_ns]


def named_files(values: Iterable[str], own_dir: Path) -> Dict[str, List]:
    """The files an argument list names, alone or as the value of ``key=value``, but for the stage's own outputs
    (under ``own_dir``)."""
    found, own = {}, Path(own_dir).resolve()
    for value in values:
        for candidate in (value, value.split('=', 1)[-1]):
            fp = file_fingerprint(Path(candidate)) if candidate and len(candidate) < 4096 else None
            if fp is not None and own not in Path(candidate).resolve().parents:
                found[candidate] = fp
    return found


