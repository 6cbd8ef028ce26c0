"""No checkpoint ever executes code: payloads in every text field of a runner checkpoint and in its pickle, through
every entry point that reads checkpoints (train --resume / load_from, test, search, export, JetViT(checkpoint=),
mmengine's loader, mmseg's init_model and its inferencer). Each payload would create a marker file; none may."""
import hashlib
import io
import os
import pickle
import re
import shutil
import struct
import sys
from pathlib import Path

import pytest
import torch

from jetvit_mm.mm.checkpoint import allow_runner_checkpoint_types
from jetvit_mm.models.checkpoint.config_text import literal_assignments, literal_config_text
from jetvit_mm.models.mixers import default_mixers

from .conftest import REPO, run_tool
from .test_fsdp_runner import train as train_fsdp2
from .test_supernet import make_teacher_checkpoint

PROBE = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'
DISTILL = REPO / 'tests' / 'configs' / 'distill_supernet_tiny_cityscapes.py'
EVIL_MODULE = 'jetvit_test_evil_module'


# ----------------------------------------------------------------------------- the literal-only config text
def test_literal_config_text_keeps_literals_and_drops_everything_that_runs(tmp_path):
    marker = tmp_path / 'ran'
    text = (f"_x = __import__('pathlib').Path({str(marker)!r}).write_text('ran')\n"
            f"_base_ = [{str(tmp_path / 'base.py')!r}]\n"
            "custom_imports = dict(imports=['os', 'not_imported_anywhere_module'], allow_failed_imports=False)\n"
            "model = dict(type='EncoderDecoder', backbone=dict(arch='LWLF', window_size=-4, ratio=(1.0, 2.0),\n"
            "    inf=1e999))\n"
            "head = dict(type='X', bad=open('/etc/passwd').read())\n"
            "import os\n"
            "print('side effect')\n")
    with pytest.warns(UserWarning, match='ignored, never run'):
        safe = literal_config_text(text)
    values = {}
    exec(compile(safe, 'safe', 'exec'), {'__builtins__': {'float': float}}, values)  # only literals (and float)
    assert not marker.exists()
    assert set(values) == {'custom_imports', 'model'}  # _x and head (calls) and _base_ are gone
    assert values['custom_imports']['imports'] == ['os']  # only modules this process already imported
    assert values['model'] == dict(type='EncoderDecoder', backbone=dict(arch='LWLF', window_size=-4,
                                                                        ratio=(1.0, 2.0), inf=float('inf')))


def test_literal_config_text_round_trips_a_real_pretty_text():
    from mmengine.config import Config
    cfg = Config.fromfile(str(PROBE))
    with_literals = literal_config_text(cfg.pretty_text)
    assert literal_assignments(with_literals) == literal_assignments(cfg.pretty_text)
    assert Config.fromstring(with_literals, '.py').model.backbone.arch == cfg.model.backbone.arch


def test_unparsable_text_gives_an_empty_config():
    with pytest.warns(UserWarning, match='does not parse'):
        assert literal_config_text('model = dict(\n') == ''


# ----------------------------------------------------------------------------- poisoned runner checkpoints
class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


def _load_raw(path: Path) -> dict:
    allow_runner_checkpoint_types()  # (a safe_globals block would take the plugin's entries out when it ends)
    return torch.load(path, map_location='cpu', weights_only=True)


def _code(marker: Path) -> str:
    return f"__import__('pathlib').Path({str(marker)!r}).write_text('ran')"


def poison_text_fields(src: Path, dst: Path, markers: Path) -> Path:
    """``src`` with a payload in every text field of its meta and of its message hub's runtime info; the config
    texts also get a ``_base_`` file and a ``custom_imports`` module that would create markers when run or
    imported."""
    markers.mkdir(parents=True, exist_ok=True)
    (markers / 'evil_base.py').write_text(f'{_code(markers / "base_ran")}\nx = 1\n')
    (markers / f'{EVIL_MODULE}.py').write_text(f'{_code(markers / "module_imported")}\n')
    raw = _load_raw(src)
    count = 0

    def payload(key: str, value: str) -> str:
        nonlocal count
        count += 1
        marker = markers / f'field_{count}_{key}'
        if key in ('cfg', 'config'):
            return (value + f'\n_x = {_code(marker)}\n_base_ = [{str(markers / "evil_base.py")!r}]\n'
                    f"custom_imports = dict(imports=['{EVIL_MODULE}', 'jetvit_mm.mm'], allow_failed_imports=True)\n")
        return f'{_code(marker)}\n'

    raw['meta']['config'] = raw['meta']['cfg']  # the field mmengine's Runner.resume executes
    for holder in (raw['meta'], raw['message_hub']['runtime_info']):
        for key, value in list(holder.items()):
            # the tensor digest is checked as a digest, never read as text (a payload there is refused as a
            # damaged file: tests/test_integrity.py); kept so that the loads below reach every text field
            if isinstance(value, str) and key != 'tensor_digest':
                holder[key] = payload(key, value)
    assert count >= 6, 'the runner checkpoint has fewer text fields than expected'
    torch.save(raw, dst)
    return dst


def poison_pickle(src: Path, dst: Path, marker: Path) -> Path:
    raw = _load_raw(src)
    raw['meta']['dataset_meta'] = _Exploit(marker)
    raw['message_hub']['runtime_info']['extra'] = _Exploit(marker)
    torch.save(raw, dst)
    return dst


def data_options(root: Path) -> list:
    return [f'{split}_dataloader.dataset.data_root={root}' for split in ('train', 'val', 'test')]


@pytest.fixture(scope='module')
def runs(tiny_cityscapes, tmp_path_factory):
    root = tmp_path_factory.mktemp('security')
    data = data_options(tiny_cityscapes)
    run_tool('train.py', PROBE, '--work-dir', root / 'probe', '--cfg-options', *data, 'train_cfg.max_iters=2',
             'train_cfg.val_interval=100')
    run_tool('train.py', DISTILL, '--work-dir', root / 'distill', '--cfg-options', data[0], 'train_cfg.max_iters=2',
             'default_hooks.checkpoint.interval=2')
    return dict(root=root, data=data, probe=root / 'probe' / 'iter_2.pth', distill=root / 'distill' / 'iter_2.pth')


def _env(markers: Path) -> dict:
    return {'PYTHONPATH': os.pathsep.join([str(markers), os.environ.get('PYTHONPATH', '')])}


def assert_no_marker(markers: Path) -> None:
    ran = sorted(p.name for p in markers.iterdir() if not p.suffix == '.py')
    assert not ran, f'code from the checkpoint ran: {ran}'


@pytest.mark.integration
def test_no_text_field_runs_on_any_entry_point(runs, tmp_path):
    markers = tmp_path / 'markers'
    probe = poison_text_fields(runs['probe'], tmp_path / 'probe_poisoned.pth', markers)
    distill = poison_text_fields(runs['distill'], tmp_path / 'distill_poisoned.pth', markers)
    env = _env(markers)
    data = runs['data']
    more = ['train_cfg.max_iters=3', 'train_cfg.val_interval=100']
    # train --resume CKPT, plain --resume on a work dir whose latest checkpoint is the file, and load_from
    proc = run_tool('train.py', PROBE, '--work-dir', tmp_path / 'resume', '--resume', probe, '--cfg-options', *data,
                    *more, env=env)
    assert 'resumed epoch: 0, iter: 2' in proc.stdout + proc.stderr
    auto = tmp_path / 'auto'
    auto.mkdir()
    (auto / 'iter_2.pth').write_bytes(probe.read_bytes())
    (auto / 'last_checkpoint').write_text(str(auto / 'iter_2.pth'))
    proc = run_tool('train.py', PROBE, '--work-dir', auto, '--resume', '--cfg-options', *data, *more, env=env)
    assert 'resumed epoch: 0, iter: 2' in proc.stdout + proc.stderr
    run_tool('train.py', PROBE, '--work-dir', tmp_path / 'load_from', '--cfg-options', *data, *more,
             f'load_from={probe}', env=env)
    # test, search (distill loss: no head needed), export
    run_tool('test.py', PROBE, probe, '--work-dir', tmp_path / 'test', '--cfg-options', *data, env=env)
    run_tool('search.py', PROBE, distill, '--metric', 'distill_loss', '--work-dir', tmp_path / 'search',
             '--beam-width', '1', '--min-gain', '100', '--latency-size', '64', '128', '--cfg-options', data[1],
             env=env)
    run_tool('export_hybrid.py', PROBE, distill, '--arch', 'LWLW', '--out-dir', tmp_path / 'export',
             '--head-checkpoint', probe, '--distill-config', DISTILL, env=env)
    assert_no_marker(markers)


@pytest.mark.integration
def test_no_text_field_runs_in_process(runs, tmp_path, monkeypatch):
    """JetViT(checkpoint=) and the core's read (what jetvit_mm's runner and tools load with), whose config text
    (where mmengine would execute the saved text: Runner.resume, an inferencer given no config) builds the model
    literal-only; mmengine's load_checkpoint and mmseg's init_model load the weights. Importing the plugin leaves
    mmengine's own behaviour alone (tests/test_plugin_import.py)."""
    from mmengine.config import Config
    from mmengine.runner import load_checkpoint
    from mmseg.apis import MMSegInferencer, init_model

    from jetvit_mm.models import JetViT
    from jetvit_mm.models.checkpoint import read

    markers = tmp_path / 'markers'
    probe = poison_text_fields(runs['probe'], tmp_path / 'probe_poisoned.pth', markers)
    monkeypatch.syspath_prepend(str(markers))
    backbone = Config.fromfile(str(PROBE)).model.backbone
    JetViT(**{k: v for k, v in backbone.items() if k not in ('type', 'checkpoint', 'frozen')}, checkpoint=probe)
    model = init_model(str(PROBE), str(probe), device='cpu')
    load_checkpoint(model, str(probe), map_location='cpu')
    raw = read(probe).raw
    for text in (raw['meta']['cfg'], raw['meta'].get('config', ''), raw['message_hub']['runtime_info']['cfg']):
        Config.fromstring(text, '.py')
    inferencer = MMSegInferencer(model=Config.fromstring(raw['meta']['cfg'], '.py'), weights=str(probe), device='cpu')
    assert inferencer.model.backbone.arch == backbone.arch  # built from the literal-only saved config
    assert EVIL_MODULE not in sys.modules
    assert_no_marker(markers)


@pytest.mark.integration
def test_pickle_payloads_are_refused_everywhere(runs, tmp_path):
    from mmengine.runner import load_checkpoint
    from mmseg.apis import init_model

    from jetvit_mm.models.checkpoint import read

    markers = tmp_path / 'markers'
    markers.mkdir()
    probe = poison_pickle(runs['probe'], tmp_path / 'pickle_poisoned.pth', markers / 'pickle_ran')
    distill = poison_pickle(runs['distill'], tmp_path / 'distill_pickle.pth', markers / 'pickle_ran')
    data = runs['data']
    for args in (('train.py', PROBE, '--work-dir', tmp_path / 'resume', '--resume', probe, '--cfg-options', *data),
                 ('train.py', PROBE, '--work-dir', tmp_path / 'lf', '--cfg-options', *data, f'load_from={probe}'),
                 ('test.py', PROBE, probe, '--work-dir', tmp_path / 'test', '--cfg-options', *data),
                 ('search.py', PROBE, distill, '--metric', 'distill_loss', '--work-dir', tmp_path / 'search',
                  '--cfg-options', data[1]),
                 ('export_hybrid.py', PROBE, distill, '--arch', 'LWLW', '--out-dir', tmp_path / 'export')):
        proc = run_tool(*args, check=False)
        assert proc.returncode != 0, f'{args[0]} accepted a pickle payload'
        assert 'Weights only load failed' in proc.stderr or "refused by jetvit_mm's checkpoint loader" in proc.stderr, \
            proc.stderr[-2000:]
    with pytest.raises(Exception, match="(?i)weights only|refused by jetvit_mm's checkpoint loader"):
        read(probe)
    with pytest.raises(Exception, match="(?i)weights only|refused by jetvit_mm's checkpoint loader"):
        init_model(str(PROBE), str(probe), device='cpu')
    with pytest.raises(Exception, match="(?i)weights only|refused by jetvit_mm's checkpoint loader"):
        load_checkpoint(torch.nn.Linear(1, 1), str(probe))
    assert_no_marker(markers)


# ----------------------------------------------------------------------------- sharded (DCP) checkpoints
SHARDED_TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2,
                    mixers=default_mixers(W=dict(window_size=2)), arch='LWLF')


def write_sharded(path: Path) -> dict:
    """An FSDP2 ``'sharded'`` runner checkpoint written in one process: ``path`` (its meta names the DCP directory)
    and ``<stem>.dcp``, a tiny JetViT's weights under ``model.`` and optimizer hyper-parameters (DCP byte entries)
    under ``optim.``. Returns the weights."""
    import torch.distributed.checkpoint as dcp

    from jetvit_mm.models import JetViT

    weights = JetViT(**SHARDED_TINY).state_dict()
    state = {'model': weights, 'optim': {'param_groups': [{'lr': 0.1, 'betas': (0.9, 0.99), 'params': ['w']}]}}
    with pytest.warns(UserWarning, match='single process'):
        dcp.save(state, checkpoint_id=str(path.with_suffix('.dcp')), no_dist=True)
    torch.save({'state_dict': {}, 'meta': {'fsdp2': 'sharded', 'fsdp2_sharded': path.with_suffix('.dcp').name}}, path)
    return weights


def _unicode(text: str) -> bytes:
    data = text.encode()
    return b'X' + struct.pack('<I', len(data)) + data  # pickle's BINUNICODE


def dotted_global_payload(marker: Path) -> bytes:
    """A protocol-4 pickle calling ``os.system`` reached as the dotted name ``os.system`` of DCP's filesystem module
    (which imports os): allowed by a prefix check on the module, resolved attribute by attribute by pickle."""
    return (b'\x80\x04' + _unicode('torch.distributed.checkpoint.filesystem') + _unicode('os.system') + b'\x93'
            + _unicode(f'touch {marker}') + b'\x85R.')


def read_metadata_trusted(directory: Path):
    """The ``.metadata`` of a DCP directory this test wrote itself (plain pickle: test files only)."""
    with open(directory / '.metadata', 'rb') as f:
        return pickle.load(f)


def test_dcp_metadata_payload_never_runs_on_a_plain_load(tmp_path):
    """The .metadata reader allowed every global under ``torch.distributed.checkpoint.``: a dotted name there runs a
    shell command on a plain load of the .pth that points at the directory."""
    from mmengine.runner import load_checkpoint

    from jetvit_mm.models.checkpoint import UnsafeCheckpointError, read

    markers = tmp_path / 'markers'
    markers.mkdir()
    path = tmp_path / 'iter_2.pth'
    write_sharded(path)
    (tmp_path / 'iter_2.dcp' / '.metadata').write_bytes(dotted_global_payload(markers / 'metadata_ran'))
    refused = (r'iter_2\.dcp/\.metadata: refused the Python global '
               r'torch\.distributed\.checkpoint\.filesystem\.os\.system')
    with pytest.raises(Exception) as failed:
        read(path)  # what JetViTRunner loads with
    assert_no_marker(markers)
    assert failed.type is UnsafeCheckpointError and re.search(refused, str(failed.value)), failed.value
    # mmengine's own loader, untouched by the plugin's import, never follows the .pth into the .dcp directory
    try:
        load_checkpoint(torch.nn.Linear(1, 1), str(path))
    except Exception:  # noqa: BLE001 (whatever mmengine says of a stub .pth: the point is the payload never ran)
        pass
    assert_no_marker(markers)


@pytest.mark.integration
def test_dcp_metadata_payload_never_runs_through_the_search_tool(tiny_cityscapes, tmp_path):
    markers = tmp_path / 'markers'
    markers.mkdir()
    path = tmp_path / 'iter_2.pth'
    write_sharded(path)
    (tmp_path / 'iter_2.dcp' / '.metadata').write_bytes(dotted_global_payload(markers / 'metadata_ran'))
    proc = run_tool('search.py', PROBE, path, '--metric', 'distill_loss', '--work-dir', tmp_path / 'search',
                    '--cfg-options', f'val_dataloader.dataset.data_root={tiny_cityscapes}', check=False)
    assert_no_marker(markers)
    assert proc.returncode != 0 and 'refused the Python global' in proc.stderr, proc.stderr[-3000:]


def test_truncated_dcp_files_are_named(tmp_path):
    """A truncated shard or .metadata failed with DCP's internal error, naming no file."""
    from jetvit_mm.models.checkpoint import read

    path = tmp_path / 'iter_2.pth'
    weights = write_sharded(path)
    loaded = read(str(path)).raw['state_dict']
    assert loaded.keys() == weights.keys() and all(torch.equal(loaded[k], v) for k, v in weights.items())
    directory = tmp_path / 'iter_2.dcp'
    shard = next(directory.glob('*.distcp'))
    shard_bytes, metadata_bytes = shard.read_bytes(), (directory / '.metadata').read_bytes()
    shard.write_bytes(shard_bytes[:len(shard_bytes) // 2])
    with pytest.raises(ValueError, match=rf'{re.escape(str(shard))} \(a shard of the sharded checkpoint .*\) cannot '
                                         r'be read \(truncated or damaged'):
        read(str(path))
    shard.write_bytes(shard_bytes)
    (directory / '.metadata').write_bytes(metadata_bytes[:len(metadata_bytes) // 2])
    with pytest.raises(ValueError, match=r'iter_2\.dcp/\.metadata is not a readable DCP metadata file \(truncated'):
        read(str(path))


@pytest.fixture(scope='module')
def sharded_run(tiny_cityscapes, tmp_path_factory) -> dict:
    """An FSDP2 run on 2 gloo ranks (torchrun) writing sharded checkpoints at iterations 1 and 2."""
    root = tmp_path_factory.mktemp('sharded_security')
    teacher = make_teacher_checkpoint(root / 'teacher.pth')
    train_fsdp2(root / 'run', tiny_cityscapes, teacher, 'train_cfg.max_iters=2', 'default_hooks.checkpoint.interval=1',
                'model_wrapper_cfg.checkpoint=sharded')
    return dict(run=root / 'run', teacher=teacher, data=tiny_cityscapes)


def copy_sharded(run: Path, iteration: int, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(run / f'iter_{iteration}.pth', dst / f'iter_{iteration}.pth')
    shutil.copytree(run / f'iter_{iteration}.dcp', dst / f'iter_{iteration}.dcp')
    return dst / f'iter_{iteration}.pth'


@pytest.mark.integration
def test_shards_are_covered_by_digests_in_the_pth(sharded_run, tmp_path):
    """A bit-rotted .distcp shard, or another checkpoint's .dcp directory beside the .pth, loaded silently with other
    weights."""
    from jetvit_mm.models.checkpoint import DamagedCheckpointError, read

    run = sharded_run['run']
    intact = read(str(run / 'iter_2.pth')).raw['state_dict']
    path = copy_sharded(run, 2, tmp_path / 'rot')
    shard = sorted((tmp_path / 'rot' / 'iter_2.dcp').glob('*.distcp'))[1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    with pytest.raises(DamagedCheckpointError, match=rf'{re.escape(str(shard))} does not match the digest'):
        read(path)
    path = copy_sharded(run, 2, tmp_path / 'foreign')
    shutil.rmtree(tmp_path / 'foreign' / 'iter_2.dcp')
    shutil.copytree(run / 'iter_1.dcp', tmp_path / 'foreign' / 'iter_2.dcp')  # another checkpoint's directory
    with pytest.raises(DamagedCheckpointError, match=r'foreign/iter_2\.dcp/\S+ does not match the digest'):
        read(str(path))
    digests = _load_raw(run / 'iter_2.pth')['meta']['fsdp2_sharded_digests']  # every file, .metadata included
    assert sorted(digests) == sorted(p.name for p in (run / 'iter_2.dcp').iterdir())
    assert intact.keys() == read(str(run / 'iter_2.pth')).raw['state_dict'].keys()


def resign_shards(pth: Path) -> None:
    """Record the current digests of ``pth``'s DCP files in its meta, as anyone who edits the files can (the digests
    guard against damage and mix-ups, not against an attacker): the payload then reaches the reader. A .pth written
    before digests has none to update."""
    raw = _load_raw(pth)
    digests = raw['meta'].get('fsdp2_sharded_digests')
    if digests is not None:
        directory = pth.with_suffix('.dcp')
        for name in digests:
            digests[name] = 'sha256:' + hashlib.sha256((directory / name).read_bytes()).hexdigest()
        torch.save(raw, pth)


def poison_byte_entry(directory: Path, marker: Path) -> str:
    """Point one optimizer byte entry (a hyper-parameter DCP reads with torch.load) of ``directory`` at a pickle
    that would create ``marker``, appended to its shard file; returns the entry's name."""
    metadata = read_metadata_trusted(directory)
    fqn, index = next((index.fqn, index) for index in metadata.storage_data
                      if index.fqn.startswith('optim.param_groups.') and index.fqn.endswith('.lr'))
    info = metadata.storage_data[index]
    payload = io.BytesIO()
    torch.save(_Exploit(marker), payload)
    shard = directory / info.relative_path
    info.offset, info.length = shard.stat().st_size, len(payload.getvalue())
    with open(shard, 'ab') as f:
        f.write(payload.getvalue())
    with open(directory / '.metadata', 'wb') as f:
        pickle.dump(metadata, f)
    return fqn


@pytest.mark.integration
def test_fsdp2_resume_never_unpickles_a_byte_entry(sharded_run, tmp_path):
    """On --resume of an FSDP2 run DCP read the optimizer's byte entries with torch.load(weights_only=False): a pickle
    placed there ran on every rank."""
    markers = tmp_path / 'markers'
    markers.mkdir()
    work = tmp_path / 'work'
    pth = copy_sharded(sharded_run['run'], 1, work)
    fqn = poison_byte_entry(work / 'iter_1.dcp', markers / 'byte_entry_ran')
    resign_shards(pth)
    (work / 'last_checkpoint').write_text(str(pth))
    try:
        train_fsdp2(work, sharded_run['data'], sharded_run['teacher'], 'train_cfg.max_iters=2',
                    'default_hooks.checkpoint.interval=1', 'model_wrapper_cfg.checkpoint=sharded', resume=True)
        failure = None
    except AssertionError as failed:  # the run's output
        failure = str(failed)
    assert_no_marker(markers)
    assert failure is not None, 'the resume accepted a pickle in a byte entry'
    assert f"its entry '{fqn}' was refused by jetvit_mm's checkpoint loader" in failure, failure[-3000:]
    assert re.search(r'iter_1\.dcp/__\d_\d\.distcp: ', failure), failure[-3000:]


@pytest.mark.integration
def test_fsdp2_resume_refuses_a_damaged_shard(sharded_run, tmp_path):
    """On --resume of an FSDP2 run (each rank checks its share of the files), a bit-rotted shard is refused on every
    rank, naming the file."""
    work = tmp_path / 'work'
    pth = copy_sharded(sharded_run['run'], 1, work)
    shard = sorted((work / 'iter_1.dcp').glob('*.distcp'))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    (work / 'last_checkpoint').write_text(str(pth))
    with pytest.raises(AssertionError) as failed:
        train_fsdp2(work, sharded_run['data'], sharded_run['teacher'], 'train_cfg.max_iters=2',
                    'default_hooks.checkpoint.interval=1', 'model_wrapper_cfg.checkpoint=sharded', resume=True)
    assert f'{shard} does not match the digest recorded for it' in str(failed.value), str(failed.value)[-3000:]


class _Getattr:
    """Pickles as ``getattr(owner, name)`` (the GLOBAL ``builtins.getattr``, then a REDUCE)."""

    def __init__(self, owner, name: str) -> None:
        self.owner, self.name = owner, name

    def __reduce__(self):
        return (getattr, (self.owner, self.name))


def test_the_allow_list_names_getattr_only_for_history_buffer_statistics(tmp_path):
    """``import jetvit_mm.mm`` allows an mmengine runner checkpoint's types for every weights-only load of the process
    (mmseg's and mmdet's clients). HistoryBuffer pickles its statistics methods through ``builtins.getattr``: that
    name resolves them and nothing else, so a pickle reaching any other attribute (the first step of every getattr
    exploit) stays refused."""
    import collections

    from mmengine.logging import HistoryBuffer

    allow_runner_checkpoint_types()  # what importing the plugin does
    path = tmp_path / 'x.pth'
    torch.save({'ok': _Getattr(HistoryBuffer, 'mean')}, path)
    assert torch.load(path, weights_only=True)['ok'] is HistoryBuffer.mean
    for owner, name in ((HistoryBuffer, 'update'), (HistoryBuffer, '__init__'), (collections.OrderedDict, 'mro'),
                        (torch.Tensor, '__reduce_ex__')):
        torch.save({'x': _Getattr(owner, name)}, path)
        with pytest.raises(pickle.UnpicklingError, match=rf'refused getattr\(.*{name}'):
            torch.load(path, weights_only=True)
