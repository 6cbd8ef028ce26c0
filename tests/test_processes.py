"""The work dir lock (jetvit_mm/processes.py) in one process: the pid is written while held, the file goes with the
block, a lock left behind by a killed run is taken over, and a file of the user's under the lock's name is never
overwritten. A second process refused while one holds it: tests/test_search_dist.py."""
import os

import pytest

from jetvit_mm.processes import work_dir_lock


def test_the_lock_holds_the_pid_and_goes_with_its_block(tmp_path):
    with work_dir_lock(tmp_path / 'new', 'tools/search.py') as path:
        assert path == tmp_path / 'new' / 'search.lock' and path.read_text() == f'{os.getpid()}\n'
    assert not path.exists() and (tmp_path / 'new').is_dir()


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path):
    (tmp_path / 'search.lock').write_text('4194304\n')  # no live process holds it
    with work_dir_lock(tmp_path, 'tools/search.py') as path:
        assert path.read_text() == f'{os.getpid()}\n'


def test_a_users_file_under_the_locks_name_is_never_overwritten(tmp_path):
    notes = tmp_path / 'search.lock'
    notes.write_text('my notes')
    with pytest.raises(FileExistsError, match=r"search\.lock exists and is not a lock file of tools/search\.py "
                                              r"\(it holds 'my notes'\)"):
        with work_dir_lock(tmp_path, 'tools/search.py'):
            pass
    assert notes.read_text() == 'my notes'
