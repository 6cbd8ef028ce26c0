"""A pure mixer core compiled once per input shape: ``torch.compile(fn, dynamic=False)``, one compiled copy of ``fn``
per shape, each created on first use.

dynamo keeps what it compiled per code object and, past ``recompile_limit`` (8) variants, runs the function eagerly
(for W's FlexAttention holding the ``[B, H, Q, KV]`` scores); a copy per shape has a code object of its own.
"""
import types
from typing import Callable, Dict, Hashable, Tuple

_COPIES: Dict[Tuple[Callable, Hashable], Callable] = {}  # (fn, shape) -> its compiled copy


def _copy(fn: Callable, number: int) -> Callable:
    """``fn`` as a new function with a code object of its own (same body, globals, defaults and closure)."""
    name = f'{fn.__name__}__shape{number}'
    code = fn.__code__.replace(co_name=name, co_qualname=name)
    copy = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__, copy.__doc__, copy.__module__ = fn.__kwdefaults__, fn.__doc__, fn.__module__
    return copy


def compiled(fn: Callable, shape: Hashable = None) -> Callable:
    """``fn`` compiled by torch.compile (inductor) without dynamic shapes, a copy per ``shape`` (the caller's input
    shape, e.g. ``tuple(qkv.shape)``): one specialised kernel set per shape, dtype and option set."""
    key = (fn, shape)
    found = _COPIES.get(key)
    if found is None:
        import torch

        found = _COPIES[key] = torch.compile(_copy(fn, len(_COPIES)), dynamic=False)
    return found
