"""Files written whole or not at all (:func:`atomic_write`: checkpoints, JSON states and results, configs), and the
JSON files the project reads (latency tables, search states, benchmark results, annotations), with a file that is
missing, truncated or not JSON, or lacks a key, refused naming the file and what it should hold."""
import json
import os
import uuid
from pathlib import Path
from typing import Any, BinaryIO, Callable, Sequence, Union

__all__ = ['atomic_write', 'read_json_file', 'write_json_atomic']


def atomic_write(path: Union[str, Path], write: Callable[[BinaryIO], None]) -> Path:
    """``write(f)`` into a new file next to ``path``, then renamed onto it: a reader or a killed writer never sees a
    partial file, and a failed write leaves nothing behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp')
    try:
        with open(tmp, 'xb') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if tmp.exists():
            tmp.unlink()
        raise
    return path


def write_json_atomic(path: Union[str, Path], data: Any) -> Path:
    """``data`` as JSON (indented; values JSON lacks, such as paths, as their text) at ``path``, by
    :func:`atomic_write`."""
    return atomic_write(path, lambda f: f.write(json.dumps(data, indent=2, default=str).encode()))


def read_json_file(path: Union[str, Path], what: str, keys: Sequence[str] = (), kind: type = dict) -> Any:
    """The JSON value in ``path``, which must be a ``kind`` (an object by default) holding ``keys``; ``what`` says
    what the file is (``'a latency table'``) in the error."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'{what} not found: {path}')
    try:
        value = json.loads(path.read_text(encoding='utf-8'))
    except UnicodeDecodeError as error:
        raise ValueError(f'{path} is not {what}: not a text file ({error})') from None
    except json.JSONDecodeError as error:
        raise ValueError(f'{path} is not {what}: not valid JSON (truncated or another format): {error}') from None
    if not isinstance(value, kind):
        raise ValueError(f'{path} is not {what}: expected a JSON {"object" if kind is dict else kind.__name__}, '
                         f'got {type(value).__name__}')
    missing = [k for k in keys if k not in value]
    if missing:
        raise ValueError(f'{path} is not {what}: it lacks the key(s) {missing} (it has {sorted(value)[:12]})')
    return value
