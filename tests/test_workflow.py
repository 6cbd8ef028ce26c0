"""The workflow engine of tools/pipeline.py (jetvit_mm.pipeline.engine), in process with Python stages: it deletes only
what it wrote, keeps a stage's previous outputs until the new ones are complete, trusts a marker only with the
outputs it recorded, and sees the data a stage reads."""
import os
from pathlib import Path

import pytest

from jetvit_mm.fingerprints import tree_fingerprint
from jetvit_mm.jsonio import write_json_atomic
from jetvit_mm.pipeline.engine import Workflow
from jetvit_mm.pipeline.products import MARKER, foreign_files
from jetvit_mm.pipeline.stage import Stage


def _stage(tmp_path: Path, name: str, source: Path, calls: list, deps=(), data=(), fail: bool = False) -> Stage:
    """A stage copying ``source`` (an input it names) into ``<name>/out.txt``, its product; counts its runs."""
    out = tmp_path / name

    def action(stage):
        calls.append(name)
        if fail:
            (out / 'half.txt').write_text('x')
            raise RuntimeError(f'{name} failed')
        (out / 'out.txt').write_text(source.read_text() + name)
    return Stage(name, out, ['copy', source], deps=deps, action=action, products=('out.txt', ), data=data)


def _run(tmp_path: Path, stages, logs=None, **kwargs) -> None:
    Workflow(tmp_path, log=(logs.append if logs is not None else lambda m: None), **kwargs).run_all(stages)


def test_a_folder_with_files_the_workflow_did_not_write_is_refused_before_any_stage_runs(tmp_path):
    src, calls = tmp_path / 'input.txt', []
    src.write_text('a')

    def stages():
        return [_stage(tmp_path, 'first', src, calls), _stage(tmp_path, 'second', src, calls, deps=['first'])]
    (tmp_path / 'second').mkdir()
    (tmp_path / 'second' / 'my_notes.txt').write_text('mine')  # the user's folder: no marker
    with pytest.raises(RuntimeError, match=r'stage second would rewrite .*second, which holds files this workflow '
                                           r'did not write \(my_notes.txt\).*--overwrite'):
        _run(tmp_path, stages())
    assert calls == [] and (tmp_path / 'second' / 'my_notes.txt').read_text() == 'mine'  # refused before any work
    (tmp_path / 'second' / 'my_notes.txt').unlink()
    _run(tmp_path, stages())
    (tmp_path / 'first' / 'my_notes.txt').write_text('mine')  # a file added to a finished stage's folder
    _run(tmp_path, stages())  # nothing to rewrite: skipped, the file stays
    assert calls == ['first', 'second'] and (tmp_path / 'first' / 'my_notes.txt').is_file()
    src.write_text('bb')  # now the folder would be rewritten: refused, naming the file outside its manifest
    with pytest.raises(RuntimeError, match=r'stage first would rewrite .*\(my_notes.txt\)'):
        _run(tmp_path, stages())
    assert calls == ['first', 'second'] and (tmp_path / 'first' / 'my_notes.txt').is_file()
    _run(tmp_path, stages(), overwrite=True)  # replaced on request
    assert calls == ['first', 'second'] * 2 and not (tmp_path / 'first' / 'my_notes.txt').exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ['first', 'input.txt', 'second']


def test_a_rerun_keeps_the_previous_outputs_until_the_new_ones_are_complete(tmp_path):
    src, calls = tmp_path / 'input.txt', []
    src.write_text('a')
    _run(tmp_path, [_stage(tmp_path, 's', src, calls)])
    src.write_text('bb')  # another size: a changed input whatever the clock's resolution
    seen = []
    failing = _stage(tmp_path, 's', src, calls, fail=True)
    action = failing.action
    failing.action = lambda stage: (seen.append((tmp_path / '.s.previous' / 'out.txt').read_text()), action(stage))
    with pytest.raises(RuntimeError, match='s failed'):
        _run(tmp_path, [failing])
    assert seen == ['as']  # kept beside the folder while the stage ran, and after it failed
    assert (tmp_path / '.s.previous' / 'out.txt').read_text() == 'as' and not (tmp_path / 's' / MARKER).exists()
    _run(tmp_path, [_stage(tmp_path, 's', src, calls)])  # the failed run is the workflow's own: it goes
    assert (tmp_path / 's' / 'out.txt').read_text() == 'bbs' and not (tmp_path / 's' / 'half.txt').exists()
    assert not (tmp_path / '.s.previous').exists()  # complete: the previous outputs go


def test_a_done_stage_whose_outputs_changed_runs_again_saying_why(tmp_path):
    src, calls, logs = tmp_path / 'input.txt', [], []
    src.write_text('a')
    out = tmp_path / 's' / 'out.txt'

    def again():
        before = len(calls)
        _run(tmp_path, [_stage(tmp_path, 's', src, calls)], logs)
        return len(calls) > before
    assert again() and not again()
    out.unlink()
    assert again() and logs[-1].endswith('its outputs are not as recorded: out.txt is missing')
    out.write_text('XX')  # same size, another content and mtime
    os.utime(out, ns=(2, 2))  # (set: a write in the same clock tick may keep the mtime)
    assert again() and logs[-1].endswith('out.txt changed (another content than when the stage finished)')
    out.write_text('as-and-more')
    assert again() and logs[-1].endswith('out.txt changed (11 bytes, 2 when the stage finished)')
    os.utime(out, ns=(1, 1))  # another mtime, the same content: the digest says it is unchanged
    assert not again()


def test_a_marker_is_trusted_only_with_the_checkpoint_it_names_and_a_stage_resumes_where_it_can(tmp_path):
    """A train stage (``last_checkpoint`` names the checkpoint) with its checkpoint gone runs afresh; a search with
    its state intact but its best-arch file gone resumes."""
    def train(stage):
        (stage.out_dir / 'iter_2.pth').write_bytes(b'weights')
        (stage.out_dir / 'last_checkpoint').write_text(str(stage.out_dir / 'iter_2.pth'))

    def search(stage):
        (stage.out_dir / 'search_state.json').write_text('{}')
        (stage.out_dir / 'best_arch_step1.txt').write_text('LW')
    stages = [Stage('train', tmp_path / 'train', ['train'], action=train, resume_flag='--resume',
                    resume_file='last_checkpoint', products=('last_checkpoint', ), pointers=('last_checkpoint', )),
              Stage('search', tmp_path / 'search', ['search'], action=search, resume_flag='--resume',
                    resume_file='search_state.json', products=('search_state.json', 'best_arch_step1.txt'))]
    wf = Workflow(tmp_path, log=lambda m: None)
    wf.run_all(stages)
    assert wf.preview(stages) == ['done', 'done']
    (tmp_path / 'search' / 'best_arch_step1.txt').unlink()
    assert wf.preview(stages) == ['done', 'resume']
    (tmp_path / 'train' / 'iter_2.pth').unlink()
    wf.fingerprints.clear()
    assert wf.assess(stages[0], wf.fingerprint(stages[0])) == ('run', 'its outputs are not as recorded: '
                                                                     'iter_2.pth is missing')


def test_changed_data_reruns_the_stages_that_read_it(tmp_path):
    data, src, calls = tmp_path / 'data', tmp_path / 'input.txt', []
    (data / 'img').mkdir(parents=True)
    image = data / 'img' / 'a.png'
    image.write_bytes(b'1234')
    src.write_text('a')

    def ran():
        before = len(calls)
        _run(tmp_path, [_stage(tmp_path, 'reads', src, calls, data=[data]), _stage(tmp_path, 'not', src, calls)])
        return calls[before:]
    assert ran() == ['reads', 'not'] and ran() == []
    image.write_bytes(b'12345')  # new content: another size and mtime
    assert ran() == ['reads']
    os.utime(image, ns=(5, 5))  # the same bytes, another mtime: counted as changed (content is never read)
    assert ran() == ['reads']
    (data / 'img' / 'b.png').write_bytes(b'1')  # a file more
    assert ran() == ['reads']
    image.write_bytes(b'abcde')  # what it cannot see: the same size with the mtime set back
    os.utime(image, ns=(5, 5))
    assert ran() == []


def test_tree_fingerprint_follows_links_and_survives_a_loop(tmp_path):
    (tmp_path / 'd').mkdir()
    (tmp_path / 'd' / 'x').write_text('1')
    (tmp_path / 'd' / 'loop').symlink_to(tmp_path / 'd')
    assert tree_fingerprint(tmp_path / 'd').startswith('1 files, sha256:')


def test_a_folder_of_an_older_version_owns_the_files_older_than_its_marker(tmp_path):
    """A marker written before manifests were recorded: the files written before it finished are the stage's."""
    (tmp_path / 'out.txt').write_text('x')
    os.utime(tmp_path / 'out.txt', (100, 100))
    write_json_atomic(tmp_path / MARKER, dict(fingerprint='f', finished=200))
    (tmp_path / 'my_notes.txt').write_text('mine')
    assert foreign_files(tmp_path) == ['my_notes.txt']


def test_pipeline_refuses_a_data_root_that_is_no_folder(tmp_path, capsys):
    import importlib.util

    from .conftest import REPO

    spec = importlib.util.spec_from_file_location('pipeline_tool', REPO / 'tools' / 'pipeline.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with pytest.raises(SystemExit):
        tool.parse_args([str(REPO / 'configs' / 'demo' / 'distill_supernet_context_seg.py'), '--teacher',
                         str(REPO / 'README.md'), '--work-dir', str(tmp_path / 'w'), '--data-root',
                         str(tmp_path / 'nowhere')])
    assert f'--data-root {tmp_path}/nowhere: no such folder' in capsys.readouterr().err
