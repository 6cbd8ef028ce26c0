"""tests/markers.py: a test that starts a process, itself or through a helper or fixture, is an integration test."""
from .conftest import run_tool
from .markers import _starts_a_process


def _runs_the_demo_tool():
    return run_tool('demo.py', '--help')


def _through_a_helper():
    return _runs_the_demo_tool()


def _in_process():
    return sum(range(3))


def test_a_process_anywhere_below_makes_an_integration_test():
    assert _starts_a_process(iter([_runs_the_demo_tool]))
    assert _starts_a_process(iter([_through_a_helper]))
    assert not _starts_a_process(iter([_in_process]))
