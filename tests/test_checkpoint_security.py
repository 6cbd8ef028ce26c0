"""No checkpoint ever executes code: payloads in every text field of a runner checkpoint and in its pickle, through
every entry point that reads checkpoints (train --resume / load_from, test, search, export, JetViT(checkpoint=),
mmengine's loader, mmseg's init_model and its inferencer). Each payload would create a marker file; none may."""
import os
import sys
from pathlib import Path

import pytest
import torch

from jetvit_mm.mm.checkpoint import runner_safe_globals
from jetvit_mm.mm.config_text import literal_assignments, literal_config_text

from .conftest import REPO, run_tool

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
    with torch.serialization.safe_globals(runner_safe_globals()):
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


def test_no_text_field_runs_in_process(runs, tmp_path, monkeypatch):
    """JetViT(checkpoint=), mmengine's load_checkpoint, mmseg's init_model and MMSegInferencer with the config taken
    from the checkpoint (the path where mmengine would execute the saved text)."""
    from mmengine.config import Config
    from mmengine.runner import load_checkpoint
    from mmseg.apis import MMSegInferencer, init_model

    import jetvit_mm.mm  # noqa: F401  (registers the loader, as a config's custom_imports does)
    from jetvit_mm.models import JetViT

    markers = tmp_path / 'markers'
    probe = poison_text_fields(runs['probe'], tmp_path / 'probe_poisoned.pth', markers)
    monkeypatch.syspath_prepend(str(markers))
    backbone = Config.fromfile(str(PROBE)).model.backbone
    JetViT(**{k: v for k, v in backbone.items() if k not in ('type', 'checkpoint', 'frozen')}, checkpoint=probe)
    model = init_model(str(PROBE), str(probe), device='cpu')
    load_checkpoint(model, str(probe), map_location='cpu')
    inferencer = MMSegInferencer(model=None, weights=str(probe), device='cpu')
    assert inferencer.model.backbone.arch == backbone.arch  # built from the literal-only saved config
    assert EVIL_MODULE not in sys.modules
    assert_no_marker(markers)


def test_pickle_payloads_are_refused_everywhere(runs, tmp_path):
    from mmengine.runner import load_checkpoint
    from mmseg.apis import init_model

    import jetvit_mm.mm  # noqa: F401
    from jetvit_mm.models.checkpoints import read_checkpoint

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
        read_checkpoint(probe)
    with pytest.raises(Exception, match="(?i)weights only|refused by jetvit_mm's checkpoint loader"):
        init_model(str(PROBE), str(probe), device='cpu')
    with pytest.raises(Exception, match="(?i)weights only|refused by jetvit_mm's checkpoint loader"):
        load_checkpoint(torch.nn.Linear(1, 1), str(probe))
    assert_no_marker(markers)


def test_every_mmengine_scheme_returns_literal_only_config_text(tmp_path):
    """Checkpoints from mmengine's other schemes (http, ...) get the same treatment as local files."""
    from mmengine.runner.checkpoint import CheckpointLoader

    from jetvit_mm.mm import enable_runner_checkpoint_loading

    marker = tmp_path / 'ran'
    text = f"model = dict(type='X')\n_x = {_code(marker)}\n"
    CheckpointLoader.register_scheme(prefixes='jetvittest://', force=True,
                                     loader=lambda filename, map_location=None: {'meta': {'config': text}})
    try:
        enable_runner_checkpoint_loading()
        with pytest.warns(UserWarning, match='never run'):
            loaded = CheckpointLoader.load_checkpoint('jetvittest://x.pth')
        assert loaded['meta']['config'] == "model = {'type': 'X'}\n"
    finally:
        CheckpointLoader._schemes.pop('jetvittest://', None)
