"""Which tests are ``unit`` and which ``integration`` (pyproject's markers), decided once at collection.

A test is an integration test when it, a fixture it uses or a function of the test modules it calls (at any depth)
starts a process (a tool, torchrun, a fresh interpreter); every other test is a unit test: in process, tiny models,
tiny data. A test that is slow in process (building a shipped full-size model) carries ``@pytest.mark.integration``
itself; a test's own marker wins.
"""
import inspect
import re
from typing import Callable, Iterator, Set

import pytest

KINDS = ('unit', 'integration')
# what starts a process, in the tests' own code: conftest.run_tool, subprocess, torchrun
PROCESS_CALLS = ('run_tool(', 'subprocess.', 'torchrun')
CALL = re.compile(r'\b([A-Za-z_]\w*)\s*\(')


def _called_test_functions(func: Callable) -> Iterator[Callable]:
    """The functions of the test modules (tests.*) that ``func``'s source calls by name."""
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        return
    for name in set(CALL.findall(source)):
        target = getattr(func, '__globals__', {}).get(name)
        if inspect.isfunction(target) and target.__module__.startswith('tests'):
            yield target


def _starts_a_process(funcs: Iterator[Callable]) -> bool:
    seen: Set[Callable] = set()
    stack = list(funcs)
    while stack:
        func = stack.pop()
        if func in seen:
            continue
        seen.add(func)
        try:
            source = inspect.getsource(func)
        except (OSError, TypeError):
            continue
        if any(call in source for call in PROCESS_CALLS):
            return True
        stack.extend(_called_test_functions(func))
    return False


def _fixture_functions(item: pytest.Item) -> Iterator[Callable]:
    """The functions of every fixture ``item`` uses, directly or through other fixtures."""
    info = getattr(item, '_fixtureinfo', None)
    if info is None:
        return
    for defs in info.name2fixturedefs.values():
        for fixture in defs:
            if fixture.baseid is not None and getattr(fixture.func, '__module__', '').startswith('tests'):
                yield fixture.func


def kind_of(item: pytest.Item) -> str:
    """'unit' or 'integration' for a collected test (its own marker if it has one)."""
    own = [k for k in KINDS if item.get_closest_marker(k) is not None]
    if len(own) == 1:
        return own[0]
    if len(own) > 1:
        raise pytest.UsageError(f'{item.nodeid} is marked both unit and integration')
    funcs = [getattr(item, 'function', None), *_fixture_functions(item)]
    return 'integration' if _starts_a_process(f for f in funcs if f is not None) else 'unit'


def mark_kinds(items: list) -> None:
    for item in items:
        kind = kind_of(item)
        if item.get_closest_marker(kind) is None:
            item.add_marker(getattr(pytest.mark, kind))
