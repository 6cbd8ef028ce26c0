"""Reading the JSON files the project reads (latency tables, search states, benchmark results, annotations), with a
file that is missing, truncated or not JSON, or lacks a key, refused naming the file and what it should hold."""
import json
from pathlib import Path
from typing import Any, Sequence, Union

__all__ = ['read_json_file']


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
