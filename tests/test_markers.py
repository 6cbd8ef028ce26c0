"""tests/markers.py: markers are explicit, and a unit test that starts a process fails, naming itself."""
import multiprocessing
import subprocess
import sys

import pytest

from .markers import UnmarkedProcessError, process_guard


def test_a_process_inside_the_guard_is_refused_and_named():
    with process_guard('tests/test_x.py::test_y'):
        with pytest.raises(UnmarkedProcessError, match=r'test_x\.py::test_y starts a process .*not marked integ'):
            subprocess.run([sys.executable, '-c', 'pass'], check=True)
        with pytest.raises(UnmarkedProcessError, match='multiprocessing'):
            multiprocessing.get_context('spawn').Process(target=print).start()
        with pytest.raises(UnmarkedProcessError, match='bash'):
            subprocess.run(['bash', '-c', 'true'])
        assert sum(range(3)) == 3  # in-process work is fine
        assert subprocess.run(['true']).returncode == 0  # a library's probe (gcc --version) is not a test's process


def test_the_guard_is_lifted_after_the_block():
    before = subprocess.Popen.__init__, multiprocessing.process.BaseProcess.start
    with process_guard('t'):
        assert subprocess.Popen.__init__ is not before[0]
    assert (subprocess.Popen.__init__, multiprocessing.process.BaseProcess.start) == before


@pytest.mark.integration
def test_an_integration_test_may_start_processes():
    assert subprocess.run([sys.executable, '-c', 'print(2)'], capture_output=True, text=True).stdout == '2\n'
