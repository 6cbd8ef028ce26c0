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


def test_inductors_isa_probe_is_allowed_and_a_lookalike_is_not():
    """On a cold inductor cache the first CPU compile dlopens a test library in a fresh interpreter: a unit test that
    compiles must not be failed for it (its compile would fall back to the torch path and test nothing)."""
    from torch._inductor.cpu_vec_isa import VecISA

    probe = [sys.executable, '-c', VecISA._avx_py_load.replace('__lib_path__', '/tmp/torchinductor_x/ab/probe.so')]
    with process_guard('t'):
        # the library does not exist: the child fails to load it, which is the probe's answer, not the guard's
        assert subprocess.run(probe, stderr=subprocess.DEVNULL).returncode != 0
        with pytest.raises(UnmarkedProcessError):
            subprocess.run([sys.executable, '-c', probe[2] + '\nimport os'])
        with pytest.raises(UnmarkedProcessError):
            subprocess.run([sys.executable, '-c', 'from ctypes import cdll; cdll.LoadLibrary("x.so")'])


def test_the_guard_is_lifted_after_the_block():
    before = subprocess.Popen.__init__, multiprocessing.process.BaseProcess.start
    with process_guard('t'):
        assert subprocess.Popen.__init__ is not before[0]
    assert (subprocess.Popen.__init__, multiprocessing.process.BaseProcess.start) == before


@pytest.mark.integration
def test_an_integration_test_may_start_processes():
    assert subprocess.run([sys.executable, '-c', 'print(2)'], capture_output=True, text=True).stdout == '2\n'
