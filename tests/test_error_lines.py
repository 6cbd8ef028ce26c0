"""Issue 47 item 4, errors a newcomer understands: bad input, tried as a new user would, ends in one ``error:`` line
that names the input, what is wrong and what to do, with a non-zero exit status, no traceback and never torch's advice
to load with ``weights_only=False``. Each example of the issue (the case named ``example``) and its neighbours run
the tool in a fresh interpreter; the checks behind them are also tested in process, over more values."""
import argparse
import random
import re
import zipfile

import pytest
import torch

from .conftest import REPO, run_tool

PROBE = 'tests/configs/seg_linear_probe_tiny_cityscapes.py'
DISTILL = 'tests/configs/distill_supernet_tiny_cityscapes.py'
# argparse's usage error ('train.py: error: ...', exit status 2) or jetvit_mm.cli.run_main's ('error: ...', 1)
ERROR_LINE = re.compile(r'^(?:[\w.]+\.py: )?error: ')


def error_line(proc, *named: str) -> str:
    """The one ``error:`` line of a refused run, checked: the run failed, without a traceback or torch's advice, and
    the line holds each of ``named``."""
    lines = [line for line in proc.stderr.splitlines() if ERROR_LINE.match(line)]
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert len(lines) == 1 and 'Traceback' not in proc.stderr, proc.stderr[-4000:]
    assert 'weights_only=False' not in proc.stderr + proc.stdout
    for text in named:
        assert text in lines[0], lines[0]
    return lines[0]


def random_bytes(n: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(n))


@pytest.fixture(scope='module')
def bad(tmp_path_factory):
    """Inputs a user gets wrong: configs without what a tool reads, and checkpoint files of every damaged kind."""
    root = tmp_path_factory.mktemp('bad')
    (root / 'no_model.py').write_text('x = 1\n')
    (root / 'unclosed.py').write_text('model = dict(\n')
    ckpt = root / 'ckpt.pth'
    torch.save({'state_dict': {'w': torch.ones(256)}}, ckpt)
    (root / 'pickle_garbage.pth').write_bytes(b'\x80\x02' + random_bytes(4000))
    (root / 'empty.pth').write_bytes(b'')
    (root / 'zeros.pth').write_bytes(bytes(4096))
    (root / 'truncated.pth').write_bytes(ckpt.read_bytes()[:300])
    crc = bytearray(ckpt.read_bytes())
    with zipfile.ZipFile(ckpt) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith('data.pkl'))
    start = info.header_offset + 30 + int.from_bytes(crc[info.header_offset + 26:info.header_offset + 28], 'little') \
        + int.from_bytes(crc[info.header_offset + 28:info.header_offset + 30], 'little')  # the local header's sizes
    crc[start + info.file_size // 2] ^= 0xff  # a byte inside data.pkl, the record every read checks
    (root / 'bad_crc.pth').write_bytes(bytes(crc))
    (root / 'noise.safetensors').write_bytes(random_bytes(4000))
    return {p.stem: str(p) for p in root.iterdir()} | {'root': root}


def run(tool: str, *args: str, env=None):
    return run_tool(f'{tool}.py', *args, check=False, env=env)


# ---------------------------------------------------------------- a launcher that did not start the tool
TORCHRUN_ENV = dict(RANK='x', LOCAL_RANK='0', WORLD_SIZE='1', MASTER_ADDR='127.0.0.1', MASTER_PORT='29500')
LAUNCHER_CASES = [  # (tool, launcher, environment added, what the line names)
    ('search', 'pytorch', {}, ('--launcher pytorch', 'RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'torchrun')),  # example
    ('train', 'pytorch', dict(RANK='0'), ('LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set', 'torchrun')),
    ('test', 'pytorch', TORCHRUN_ENV, ("RANK='x': not an integer", 'torchrun')),
    ('train', 'slurm', {}, ('--launcher slurm', 'SLURM_PROCID, SLURM_NTASKS', 'srun')),  # example
    ('search', 'slurm', dict(SLURM_PROCID='0'), ('SLURM_NTASKS', 'srun', 'drop --launcher slurm')),
]


@pytest.mark.integration
@pytest.mark.parametrize('tool, launcher, env, named', LAUNCHER_CASES,
                         ids=['example-pytorch', 'rank-only', 'rank-not-integer', 'example-slurm', 'slurm-no-ntasks'])
def test_a_launcher_that_did_not_start_the_tool_is_named(tool, launcher, env, named, bad):
    files = (bad['ckpt'], ) if tool in ('search', 'test') else ()
    proc = run(tool, PROBE, *files, '--launcher', launcher, '--work-dir', str(bad['root'] / 'w'), env=env)
    assert error_line(proc, *named).startswith(f'{tool}.py: error: ')  # a usage error, before any work


# ---------------------------------------------------------------- --cfg-options items mmengine cannot read
CFG_OPTION_CASES = [
    ('train', 'foo', ("'foo': it has no =", 'KEY=VALUE')),  # example
    ('test', '=3', ("'=3': its key is empty", 'KEY=VALUE')),
    ('search', 'model..arch=LWLF', ("its key 'model..arch' has an empty part", )),
    ('export_hybrid', 'model.backbone.arch=[L,W', ("its value '[L,W' has unbalanced brackets", )),
]


@pytest.mark.integration
@pytest.mark.parametrize('tool, item, named', CFG_OPTION_CASES, ids=['example', 'empty-key', 'empty-part', 'bracket'])
def test_a_cfg_option_that_is_not_key_value_is_named(tool, item, named, bad):
    files = {'search': (bad['ckpt'], ), 'test': (bad['ckpt'], ),
             'export_hybrid': (bad['ckpt'], '--arch', 'LWLF', '--out-dir', str(bad['root'] / 'x'))}.get(tool, ())
    proc = run(tool, PROBE, *files, '--cfg-options', item)
    error_line(proc, '--cfg-options', *named)


# ---------------------------------------------------------------- a config the tool cannot use
CONFIG_CASES = [  # (tool, config, more arguments, what the line names)
    ('train', 'no_model', (), ('no_model.py has no model', 'tools/train.py reads model, train_dataloader',
                               'configs/probe/')),  # example
    ('test', 'no_model', ('ckpt', ), ('no_model.py has no model', 'test_dataloader', 'configs/probe/')),
    ('train', PROBE, ('--cfg-options', 'train_dataloader=None'), ('has no train_dataloader', )),
    ('search', DISTILL, ('ckpt', ), ('has no model.backbone', 'it is a distillation config', 'configs/probe/',
                                     'the distillation checkpoint is its CHECKPOINT argument')),  # example
    ('test', DISTILL, ('ckpt', ), ('has no test_dataloader', 'it is a distillation config', 'configs/probe/')),
    ('export_hybrid', DISTILL, ('ckpt', '--arch', 'LWLF', '--out-dir', 'root'), ('it is a distillation config', )),
    ('train', 'unclosed', (), ('unclosed.py cannot be read as a config', 'SyntaxError', 'fix it')),
    ('test', 'ckpt', ('ckpt', ), ('ckpt.pth cannot be read as a config', 'CONFIG comes first')),
]


@pytest.mark.integration
@pytest.mark.parametrize('tool, config, more, named', CONFIG_CASES,
                         ids=['example-no-model', 'test-no-model', 'no-train-dataloader', 'example-distill-to-search',
                              'distill-to-test', 'distill-to-export', 'syntax-error', 'checkpoint-as-config'])
def test_a_config_the_tool_cannot_use_is_named(tool, config, more, named, bad):
    args = [bad.get(a, a) if a != 'root' else str(bad['root'] / 'x') for a in (config, *more)]
    proc = run(tool, *args, '--work-dir', str(bad['root'] / 'w')) if tool != 'export_hybrid' else run(tool, *args)
    error_line(proc, *named)


# ---------------------------------------------------------------- a training length that is no number of iterations
@pytest.mark.integration
@pytest.mark.parametrize('option', ['train_cfg.max_iters=0', 'train_cfg.max_iters=2.5', 'train_cfg.max_iters=nan',
                                    'train_cfg.val_interval=0'], ids=['example', 'float', 'nan', 'val-interval'])
def test_a_training_length_below_one_iteration_is_named(option, bad):
    proc = run('train', PROBE, '--work-dir', str(bad['root'] / 'w'), '--cfg-options', option)
    error_line(proc, f'{option}: expected an integer >= 1', f'--cfg-options {option.split("=")[0]}=')


# ---------------------------------------------------------------- an arch of the wrong length or letters
ARCH_CASES = [
    ('search', ('--stage', '2', '--step1-arch', 'LL'), ('--step1-arch LL: 2 letters for the 4 layers', )),  # example
    ('search', ('--stage', '2', '--step1-arch', 'LXFL'), ("'X' at layer 1", 'valid letters')),
    ('export_hybrid', ('--arch', 'LWL', '--out-dir', 'root'), ('--arch LWL: 3 letters for the 4 layers', )),
]


@pytest.mark.integration
@pytest.mark.parametrize('tool, more, named', ARCH_CASES, ids=['example', 'wrong-letter', 'export-length'])
def test_an_arch_of_the_wrong_length_is_named_before_any_work(tool, more, named, bad):
    proc = run(tool, PROBE, bad['ckpt'], *[str(bad['root'] / 'x') if a == 'root' else a for a in more])
    assert error_line(proc, *named).startswith(f'{tool}.py: error: ')


# ---------------------------------------------------------------- a damaged checkpoint file
CHECKPOINT_CASES = [  # (tool, file, what the line names besides the file)
    ('test', 'pickle_garbage', ('is not a readable torch checkpoint', 'copy or save it again')),  # example
    ('test', 'empty', ('it is empty', 'copy or save it again')),
    ('test', 'zeros', ("starts with b'\\x00\\x00'", 'copy or save it again')),
    ('test', 'truncated', ('is not a readable torch checkpoint', 'copy or save it again')),
    ('test', 'bad_crc', ('fails the zip check', 'copy or save it again')),
    ('test', 'noise', ('is not a readable .safetensors file', 'copy or save it again')),
    ('search', 'pickle_garbage', ('is not a readable torch checkpoint', )),
    ('train', 'pickle_garbage', ('is not a readable torch checkpoint', )),
    ('export_hybrid', 'zeros', ('is not a readable torch checkpoint', )),
    ('convert_depth_anything', 'truncated', ('is not a readable torch checkpoint', )),
]


@pytest.mark.integration
@pytest.mark.parametrize('tool, name, named', CHECKPOINT_CASES, ids=[f'{t}-{n}' for t, n, _ in CHECKPOINT_CASES])
def test_a_damaged_checkpoint_is_named(tool, name, named, bad, tiny_cityscapes):
    path, work = bad[name], str(bad['root'] / f'w_{tool}')
    data = [f'{split}_dataloader.dataset.data_root={tiny_cityscapes}' for split in ('train', 'val')]
    args = dict(test=(PROBE, path, '--work-dir', work),
                search=(PROBE, path, '--work-dir', work, '--cfg-options', data[1]),
                train=(PROBE, '--resume', path, '--work-dir', work, '--cfg-options', *data),  # read as training resumes
                export_hybrid=(PROBE, path, '--arch', 'LWLF', '--out-dir', work),
                convert_depth_anything=(path, str(bad['root'] / 'converted.pth')))[tool]
    line = error_line(run(tool, *args), path, *named)
    assert line.startswith('error: '), line


@pytest.mark.integration
@pytest.mark.parametrize('kind', ['last-checkpoint', 'latency-table'])
def test_another_damaged_input_file_is_named(kind, bad):
    """The files a run reads besides checkpoints: the work dir's last_checkpoint marker (--resume), a latency table."""
    work = bad['root'] / f'w_{kind}'
    work.mkdir()
    if kind == 'last-checkpoint':
        (work / 'last_checkpoint').write_bytes(b'\xff\xfe\x00garbage')
        proc, named = run('train', PROBE, '--resume', '--work-dir', str(work)), ('last_checkpoint cannot be read',
                                                                                 'delete it to start afresh')
    else:
        (work / 'latency.json').write_text('{"base": 1.0, "F"')
        proc = run('search', PROBE, bad['ckpt'], '--latency-table', str(work / 'latency.json'), '--work-dir', str(work))
        named = ('latency.json', 'not valid JSON')
    error_line(proc, *named)


# ---------------------------------------------------------------- an argument JetViT no longer takes
REMOVED_CASES = [
    ('model.backbone.window_size=8', ('JetViT: window_size=8: no longer an argument', 'mixers.W.window_size',
                                      "'W': {'type': 'WindowAttention', 'window_size': 8}")),  # example
    ('model.backbone.linear_cfg.conv=static', ("linear_cfg={'conv': 'static'}", 'mixers.L.conv')),
    ('model.backbone.window_kernel=flex', ('window_kernel', 'mixers.W.kernel', "'kernel': 'flex'")),
    ('model.backbone.archh=LWLF', ("unknown argument archh='LWLF'; did you mean arch?", )),
    ('model.backbone.mixers.W.window_kernel=flex', ("unknown option(s) ['mixers.W.window_kernel']", 'mixers.W.kernel')),
]


@pytest.mark.integration
@pytest.mark.parametrize('option, named', REMOVED_CASES,
                         ids=['example', 'linear-cfg', 'window-kernel', 'typo', 'mixer-option'])
def test_a_removed_or_unknown_model_argument_names_the_new_spelling(option, named, bad):
    proc = run('train', PROBE, '--work-dir', str(bad['root'] / 'w'), '--cfg-options', option)
    error_line(proc, *named)


# ---------------------------------------------------------------- a config type= that no registry holds
TYPE_CASES = [  # (tool, config, option, more arguments, what the line names)
    ('train', PROBE, 'model.backbone.type=JetVit', (), ("type='JetVit' is not in the mmseg::model registry",
                                                         "['JetViT', 'JetViTSupernet']", 'custom_imports')),
    ('test', PROBE, 'test_dataloader.dataset.type=CityscapesDatset', ('ckpt', ),
     ("type='CityscapesDatset' is not in the mmseg::dataset registry", "'CityscapesDataset'")),
    ('train', PROBE, 'model.decode_head.type=Nothing', (), ("type='Nothing' is not in the mmseg::model registry",
                                                             "jetvit_mm registers there: ['DPTDepthHead'")),
]


@pytest.mark.integration
@pytest.mark.parametrize('tool, config, option, more, named', TYPE_CASES, ids=['model', 'dataset', 'none-close'])
def test_a_config_type_no_registry_holds_is_named_with_the_closest_names(tool, config, option, more, named, bad):
    proc = run(tool, config, *[bad.get(a, a) for a in more], '--work-dir', str(bad['root'] / 'w'),
               '--cfg-options', option)
    error_line(proc, *named)


# ================================================================ the checks behind them, in process
def test_run_main_words_a_refusal_in_one_line_and_lets_other_errors_through(monkeypatch):
    from jetvit_mm.cli import run_main

    def refuse():
        raise ValueError('x.pth: first line\n  second line\n')

    with pytest.raises(SystemExit) as exit_:
        run_main(refuse)
    assert exit_.value.code == 'error: x.pth: first line; second line'
    monkeypatch.setenv('JETVIT_MM_TRACEBACK', '1')
    with pytest.raises(ValueError, match='first line'):
        run_main(refuse)
    with pytest.raises(ZeroDivisionError):  # a bug keeps its traceback
        run_main(lambda: 1 / 0)


@pytest.mark.parametrize('env, problem', [
    ({}, 'RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set'),
    (dict(TORCHRUN_ENV, RANK='0', WORLD_SIZE='two'), "WORLD_SIZE='two': not an integer"),
    (dict(TORCHRUN_ENV, RANK='0', MASTER_ADDR=''), 'MASTER_ADDR not set'),
    (dict(TORCHRUN_ENV, RANK='0'), None),
])
def test_launch_problem_names_each_variable_torchrun_sets(env, problem, monkeypatch):
    from jetvit_mm.mm.engine.runner import launch_problem
    for name in TORCHRUN_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert launch_problem('none') is None
    found = launch_problem('pytorch')
    if problem is None:
        assert found is None, found
    else:
        assert problem in found and 'torchrun' in found, found


@pytest.mark.parametrize('value', [0, -1, 2.5, float('nan'), float('inf'), '10', None, True])
def test_check_schedule_takes_only_a_positive_integer(value):
    from mmengine.config import Config

    from jetvit_mm.mm.engine.launch import check_schedule
    with pytest.raises(ValueError, match=rf'c\.py: train_cfg\.max_iters={re.escape(repr(value))}: expected an '
                                         r'integer >= 1'):
        check_schedule(Config(dict(train_cfg=dict(max_iters=value))), 'c.py')
    check_schedule(Config(dict(train_cfg=dict(max_epochs=3, val_interval=1))), 'c.py')
    check_schedule(Config(dict(train_cfg=dict(max_iters=1e4))), 'c.py')  # a whole float, as mmengine takes it


@pytest.mark.parametrize('item, problem', [('a', 'it has no ='), (' =1', 'its key is empty'),
                                           ('a.=1', "its key 'a.' has an empty part"),
                                           ('a=(1,2', "its value '(1,2' has unbalanced brackets")])
def test_cfg_options_items_mmengine_cannot_read_are_usage_errors(item, problem, capsys):
    from jetvit_mm.mm.engine.launch import ConfigOptions
    parser = argparse.ArgumentParser(prog='tool.py')
    parser.add_argument('--cfg-options', nargs='+', action=ConfigOptions)
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(['--cfg-options', 'ok=1', item])
    assert exit_.value.code == 2 and f'{item!r}: {problem}' in capsys.readouterr().err
    assert parser.parse_args(['--cfg-options', 'a.b=1', 'c=[1,2]', 'd=x=y']).cfg_options == {'a.b': 1, 'c': [1, 2],
                                                                                             'd': 'x=y'}


@pytest.mark.parametrize('seed', range(8))
def test_bytes_after_a_pickle_header_are_a_damaged_file_never_torchs_advice(seed, tmp_path):
    from jetvit_mm.models.checkpoint import read
    path = tmp_path / 'noise.pth'
    path.write_bytes(b'\x80' + bytes([2 + seed % 4]) + random_bytes(2000, seed))
    with pytest.raises(ValueError) as error:
        read(path)
    assert 'noise.pth is not a readable torch checkpoint' in str(error.value), error.value
    assert 'weights_only=False' not in str(error.value) and 'copy or save it again' in str(error.value)


def test_declared_depth_reads_the_backbone_without_building_it():
    from mmengine.config import Config

    from jetvit_mm.mm.search.scoring import declared_depth
    assert declared_depth(Config.fromfile(str(REPO / PROBE))) == 4
    assert declared_depth(Config(dict(model=dict(backbone=dict(model_name='dinov3_vitl16'))))) == 24
    assert declared_depth(Config(dict(model=dict(backbone=dict())))) == 12  # JetViT's default, dinov3_vitb16
    assert declared_depth(Config(dict(model=dict(backbone=dict(model_name='vit_small_patch16_224'))))) is None


class _Call:
    """Pickles as ``function(*args)``."""

    def __init__(self, function, *args) -> None:
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def test_a_pickled_object_is_refused_as_such_never_with_torchs_advice(tmp_path):
    """A Python global, or an attribute the runner's allow-list refuses: refused as unsafe (what to do instead), not
    as damaged; torch's advice to load with weights_only=False never reaches the message."""
    import os

    from mmengine.logging import HistoryBuffer

    from jetvit_mm.mm.checkpoint import allow_runner_checkpoint_types
    from jetvit_mm.models.checkpoint import read
    from jetvit_mm.models.checkpoint.integrity import UnsafeCheckpointError
    allow_runner_checkpoint_types()
    path = tmp_path / 'x.pth'
    for payload, reason in ((_Call(os.system, 'true'), r'it names the Python global (posix|os)\.system'),
                            (_Call(getattr, HistoryBuffer, 'update'), r"refused getattr\(.*'update'\)")):
        torch.save({'state_dict': {}, 'x': payload}, path)
        with pytest.raises(UnsafeCheckpointError, match=rf'x\.pth was refused by .*: {reason}.*re-saved') as error:
            read(path)
        assert 'weights_only=False' not in str(error.value)


def test_a_registry_miss_is_one_line_and_any_other_key_error_keeps_its_traceback(monkeypatch):
    from mmseg.registry import MODELS, TRANSFORMS

    import jetvit_mm.mm  # noqa: F401  (registers the types)
    from jetvit_mm.cli import run_main
    from jetvit_mm.mm.registry import unregistered_type

    def build(registry, kind):
        def main():
            registry.build(dict(type=kind))
        return main

    with pytest.raises(SystemExit) as exit_:
        run_main(build(MODELS, 'WindowAtention'))
    assert exit_.value.code.startswith("error: config: type='WindowAtention' is not in the mmseg::model registry; "
                                       "registered names closest to it: ['WindowAttention'"), exit_.value.code
    with pytest.raises(KeyError) as miss:
        build(TRANSFORMS, 'loadimagefromfile')()
    assert "closest to it: ['LoadImageFromFile'" in unregistered_type(miss.value)  # case alone differs
    assert unregistered_type(KeyError('model')) is None
    with pytest.raises(KeyError, match="'model'"):  # a KeyError of a bug keeps its traceback
        run_main(lambda: {}['model'])
    monkeypatch.setenv('JETVIT_MM_TRACEBACK', '1')
    with pytest.raises(KeyError, match='WindowAtention is not in'):
        run_main(build(MODELS, 'WindowAtention'))
