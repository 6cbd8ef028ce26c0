"""A user trying to break each tool and API: every bad input is refused before any work, with an error that names the
input and what it accepts, and nothing is left behind that blocks the corrected command."""
import argparse
import importlib.util
import json
import pickle
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

import jetvit_mm.mm  # noqa: F401  (registers the plugin, as a config's custom_imports does)

from .conftest import REPO

PROBE = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'
TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2, window_size=2, arch='LWLF')


def load_tool(name: str):
    spec = importlib.util.spec_from_file_location(f'_tool_{name}', REPO / 'tools' / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def files(tmp_path):
    """An existing config and checkpoint (only their existence matters before any work), a regular file in the way
    of a folder, and a missing path."""
    ckpt = tmp_path / 'x.pth'
    torch.save({'state_dict': {}}, ckpt)
    blocker = tmp_path / 'a_file'
    blocker.write_text('')
    return dict(cfg=str(PROBE), ckpt=str(ckpt), under_file=str(blocker / 'sub'), file=str(blocker),
                missing=str(tmp_path / 'missing.pth'), tmp=tmp_path)


# (tool, argv (formatted with the fixture), the message expected in argparse's usage error)
ARGUMENT_CASES = [
    ('search', '{cfg} {ckpt} --min-gain nan', r'--min-gain: expected a finite number, got nan'),
    ('search', '{cfg} {ckpt} --min-gain inf', r'--min-gain: expected a finite number, got inf'),
    ('search', '{cfg} {ckpt} --stage 2 --max-full -1', r'--max-full: expected an integer >= 0, got -1'),
    ('search', '{cfg} {ckpt} --stage 2 --tolerance nan', r'--tolerance: expected a finite number'),
    ('search', '{cfg} {ckpt} --beam-width 0', r'--beam-width: expected an integer >= 1, got 0'),
    ('search', '{cfg} {ckpt} --beam-width 2.5', r"--beam-width: expected an integer >= 1, got '2.5'"),
    ('search', '{cfg} {ckpt} --latency-budget 0', r'--latency-budget: expected a finite number > 0, got 0'),
    ('search', '{cfg} {ckpt} --latency-budget=-inf', r'--latency-budget: expected a finite number > 0'),
    ('search', '{cfg} {ckpt} --latency-size 0 64', r'--latency-size: expected an integer >= 1, got 0'),
    ('search', '{cfg} {ckpt} --seed -3', r'--seed: expected an integer >= 0, got -3'),
    ('search', '{cfg} {ckpt} --stage 2 --step1-arch LXF', r"--step1-arch: arch 'LXF' has invalid letter.*valid"),
    ('search', '{cfg} {ckpt} --stage 3', r"--stage: invalid choice: 3 \(choose from 1, 2\)"),
    ('search', '{cfg} {ckpt} --max-full 2', r'--max-full, --tolerance and --step1-arch are Step 2 options'),
    ('search', '{cfg} {ckpt} --stage 2 --min-gain 0.1', r'--min-gain is a Step 1 option'),
    ('search', '{cfg} {ckpt} --distill-config {cfg}', r'--distill-config is used by --export only'),
    ('search', '{cfg} {missing}', r'checkpoint file not found: .*missing\.pth'),
    ('search', '{cfg} {ckpt} --head-checkpoint {missing}', r'head-checkpoint file not found'),
    ('search', '{cfg} {ckpt} --latency-table {missing}', r'latency-table file not found'),
    ('search', '{cfg} {ckpt} --work-dir {under_file}', r'--work-dir .*cannot be created: .*a_file is a file'),
    ('search', '{cfg} {ckpt} --work-dir {file}', r'--work-dir .*exists and is not a folder'),
    ('search', '{cfg} {ckpt} --device cuda:0', r'--device cuda:0: no CUDA device'),
    ('train', '{cfg} --resume {ckpt} --cfg-options load_from={ckpt}', r'--resume and --cfg-options load_from=.* '
                                                                       r'conflict'),
    ('train', '{cfg} --resume --cfg-options resume=False', r'--resume and --cfg-options resume=\.\.\. conflict'),
    ('train', '{cfg} --resume {missing}', r'--resume .*missing\.pth: checkpoint file not found'),
    ('train', '{missing}', r'config file not found'),
    ('train', '{cfg} --work-dir {under_file}', r'--work-dir .*cannot be created'),
    ('train', '{cfg} --local-rank -1', r'--local_rank/--local-rank: expected an integer >= 0'),
    ('train', '{cfg} --launcher mpi', r"--launcher: invalid choice: 'mpi'"),
    ('test', '{cfg} {missing}', r'checkpoint file not found'),
    ('test', '{cfg} {ckpt} --out {under_file}', r'--out .*cannot be created: .*a_file is a file'),
    ('test', '{cfg} {ckpt} --out {tmp}', r'--out .*exists and is a folder'),
    ('export_hybrid', '{cfg} {ckpt} --arch LWQ --out-dir {tmp}', r"--arch: arch 'LWQ' has invalid letter"),
    ('export_hybrid', '{cfg} {ckpt} --arch LWLW --out-dir {file}', r'--out-dir .*exists and is not a folder'),
    ('convert_depth_anything', '{missing} {tmp}/out.pth', r'src file not found'),
    ('convert_depth_anything', '{ckpt} {under_file}/out.pth', r'dst .*cannot be created'),
    ('benchmark', 'mixers --dim 0', r'--dim: expected an integer >= 1, got 0'),
    ('benchmark', 'mixers --grid 64 -1', r'--grid: expected an integer >= 1, got -1'),
    ('benchmark', 'mixers --threads -2', r'--threads: expected an integer >= 0'),
    ('benchmark', 'mixers --json {under_file}/r.json', r'--json .*cannot be created'),
    ('benchmark', 'models --size 0 64', r'--size: expected an integer >= 1'),
    ('benchmark', 'models --throughput 0', r'--throughput: expected an integer >= 1'),
    ('benchmark', 'models --plot {tmp}', r'--plot .*exists and is a folder'),
    ('benchmark', 'plot {missing} --out {tmp}/p.png', r'result file not found'),
    ('export_onnx', '{cfg} {missing} --out {tmp}/m.onnx', r'checkpoint file not found'),
    ('export_onnx', '{cfg} --out {under_file}/m.onnx', r'--out .*cannot be created'),
    ('export_onnx', '{cfg} --out {tmp}/m.onnx --check-grid 0 4', r'--check-grid: expected an integer >= 1'),
    ('infer', '{cfg} {missing} img.png --out-dir {tmp}/o', r'checkpoint file not found'),
    ('infer', '{cfg} none img.png --out-dir {file}', r'--out-dir .*exists and is not a folder'),
    ('demo', '--jobs 0', r'--jobs: expected an integer >= 1, got 0'),
    ('demo', '--min-gain inf', r'--min-gain: expected a finite number'),
    ('demo', '--work-dir {file}', r'--work-dir .*exists and is not a folder'),
]


@pytest.mark.parametrize('tool, argv, message', ARGUMENT_CASES,
                         ids=[f'{t}:{a.split("}")[-1].strip() or a}' for t, a, _ in ARGUMENT_CASES])
def test_every_tool_refuses_a_bad_argument_before_any_work(tool, argv, message, files, capsys):
    module = load_tool(tool)
    entry = getattr(module, 'parse_args', None) or module.main
    before = sorted(p.name for p in files['tmp'].iterdir())
    with pytest.raises(SystemExit) as exit_:
        entry(argv.format(**files).split())
    assert exit_.value.code == 2, 'argparse usage error'
    err = capsys.readouterr().err
    assert 'usage:' in err
    import re
    assert re.search(message, err), err
    assert sorted(p.name for p in files['tmp'].iterdir()) == before, 'nothing is written'


def test_test_tool_creates_a_missing_out_folder(files):
    """--out into a missing folder is accepted (it is created, the metrics written atomically); the old failure
    came only after the whole evaluation."""
    from jetvit_mm.mm.launch import write_metrics
    args = load_tool('test').parse_args([files['cfg'], files['ckpt'], '--out', str(files['tmp'] / 'new' / 'm.json')])
    write_metrics({'mIoU': torch.tensor(12.5)}, args.out)
    assert json.loads(Path(args.out).read_text()) == {'mIoU': 12.5}
    assert [p.name for p in Path(args.out).parent.iterdir()] == ['m.json']


def test_argument_types_name_the_valid_range():
    from jetvit_mm.cli import finite, integer
    with pytest.raises(argparse.ArgumentTypeError, match=r'expected a finite number >= 0 <= 1, got 2'):
        finite(minimum=0, maximum=1)('2')
    with pytest.raises(argparse.ArgumentTypeError, match=r"expected an integer >= 1 <= 4, got 'x'"):
        integer(minimum=1, maximum=4)('x')
    assert finite()('-1e3') == -1000. and integer(maximum=3)('-7') == -7


# ------------------------------------------------------------------ data formats
def test_empty_dataset_is_named_with_where_it_looked(tmp_path):
    from jetvit_mm.mm.data_checks import DataInputError, build_checked_dataset
    cfg = Config.fromfile(str(PROBE)).val_dataloader.dataset
    cfg.data_root = str(tmp_path)
    with DefaultScope.overwrite_default_scope('mmseg'):
        with pytest.raises(DataInputError, match=r'CityscapesDataset\(data_root=.*\): .*leftImg8bit/val does not '
                                                 r'exist; check data_root, data_prefix and ann_file'):
            build_checked_dataset(cfg.to_dict())
        (tmp_path / 'leftImg8bit' / 'val').mkdir(parents=True)
        (tmp_path / 'gtFine' / 'val').mkdir(parents=True)
        with pytest.raises(DataInputError, match=r'CityscapesDataset\(data_root=.*\) has no samples: it looked in '
                                                 r'.*leftImg8bit.*check data_root, data_prefix and ann_file'):
            build_checked_dataset(cfg.to_dict())


def test_empty_dataset_through_the_train_tool(tmp_path):
    """The runner the tools build refuses it when it builds the dataloader: before the first iteration (mmengine:
    'need at least one array to concatenate')."""
    from jetvit_mm.mm.data_checks import DataInputError
    from jetvit_mm.mm.launch import build_runner
    cfg = Config.fromfile(str(PROBE))
    (tmp_path / 'leftImg8bit' / 'train').mkdir(parents=True)
    (tmp_path / 'gtFine' / 'train').mkdir(parents=True)
    cfg.merge_from_dict({'train_dataloader.dataset.data_root': str(tmp_path), 'work_dir': str(tmp_path / 'work'),
                         'launcher': 'none'})
    runner = build_runner(cfg)
    with pytest.raises(DataInputError, match='has no samples'):
        runner.train_dataloader  # noqa: B018  (the runner builds it on first access)


@pytest.fixture
def coco(tmp_path):
    from jetvit_mm.testing.datasets import make_coco
    root = make_coco(tmp_path / 'coco', splits={'train2017': 1, 'val2017': 1, 'test2017': 0})
    good = root / 'annotations' / 'instances_val2017.json'
    truncated = tmp_path / 'truncated.json'
    truncated.write_text(good.read_text()[:100])
    keyless = tmp_path / 'keyless.json'
    keyless.write_text(json.dumps({'images': json.loads(good.read_text())['images']}))
    return dict(root=root, truncated=truncated, keyless=keyless)


def test_coco_annotations_truncated_or_keyless_are_named(coco):
    from jetvit_mm.mm.data_checks import DataInputError, build_checked_dataset, build_checked_evaluator
    with DefaultScope.overwrite_default_scope('mmdet'):
        for name, pattern in (('truncated', 'is not valid JSON'), ('keyless', r'lacks the key(\(s\))? ')):
            ann = str(coco[name])
            with pytest.raises(DataInputError, match=rf'the evaluator( CocoMetric)?: .*{name}\.json {pattern}'):
                build_checked_evaluator(dict(type='CocoMetric', ann_file=ann, metric='bbox'))
            dataset = dict(type='CocoDataset', data_root=str(coco['root']), ann_file=ann,
                           data_prefix=dict(img='val2017/'), pipeline=[])
            with pytest.raises(DataInputError, match=rf'CocoDataset\(.*{name}\.json {pattern}'):
                build_checked_dataset(dataset)


def test_da2k_annotations_truncated_or_not_an_object_are_named(tmp_path):
    from jetvit_mm.depth.formats import read_da2k_annotations
    bad = tmp_path / 'annotations.json'
    bad.write_text('{"indoor/0.jpg": [{"point1": [1, 2]')
    with pytest.raises(ValueError, match=r'annotations\.json is not DA-2K annotations .*not valid JSON'):
        read_da2k_annotations(bad, tmp_path)
    bad.write_text('[1, 2]')
    with pytest.raises(ValueError, match=r'annotations\.json is not DA-2K annotations .*expected a JSON object'):
        read_da2k_annotations(bad, tmp_path)


@pytest.mark.parametrize('text, pattern', [('{"base": 1.0, "F"', 'not valid JSON'),
                                           ('{"base": 1.0, "F": 2.0}', 'needs non-negative milliseconds'),
                                           ('[]', 'expected a JSON object'),
                                           ('', 'not valid JSON')], ids=['truncated', 'keyless', 'list', 'empty'])
def test_latency_table_is_named(tmp_path, text, pattern):
    from jetvit_mm.search.latency import read_latency_table
    path = tmp_path / 'latency_table.json'
    path.write_text(text)
    with pytest.raises(ValueError, match=rf'latency_table\.json.*{pattern}'):
        read_latency_table(path)


def test_search_state_truncated_is_named_and_untouched(tmp_path):
    from jetvit_mm.search.run import open_state
    state = tmp_path / 'search_state.json'
    state.write_text('{"version": 2, "stages": {"1": {"scores": {"LL')
    before = state.read_text()
    with pytest.raises(ValueError, match=r'search_state\.json is not a search state .*not valid JSON'):
        open_state(state, 1, dict(metric='mIoU'), resume=True)
    assert state.read_text() == before  # nothing lost: the user can repair or move it


def test_benchmark_result_truncated_or_keyless_is_named(tmp_path):
    plot = load_tool('benchmark')
    result = tmp_path / 'result.json'
    for text, pattern in (('{"command": "mod', 'not valid JSON'),
                          ('{"rows": []}', r"lacks the key\(s\) \['command'\]")):
        result.write_text(text)
        with pytest.raises(ValueError, match=rf'result\.json is not a benchmark result .*{pattern}'):
            plot.main(['plot', str(result), '--out', str(tmp_path / 'p.png')])
    assert not (tmp_path / 'p.png').exists()


def test_empty_batch_is_named():
    from jetvit_mm.models import JetViT
    model = JetViT(**TINY).eval()
    for shape in ((0, 3, 32, 64), (1, 3, 0, 64)):
        with pytest.raises(ValueError, match=r'empty input: expected at least one image .* got shape'):
            model(torch.zeros(shape))


@pytest.mark.parametrize('content, pattern', [(b'', "holds '', not the path of one checkpoint"),
                                              (b'\xff\xfe\x00garbage', 'cannot be read'),
                                              (b'/no/such/iter_4.pth', "names '/no/such/iter_4.pth', which is not a "
                                                                       "file")],
                         ids=['empty', 'binary', 'dangling'])
def test_damaged_last_checkpoint_is_named(tmp_path, content, pattern):
    from jetvit_mm.mm.launch import latest_checkpoint, set_resume
    (tmp_path / 'last_checkpoint').write_bytes(content)
    with pytest.raises((ValueError, FileNotFoundError), match=rf'last_checkpoint .*{pattern}'):
        latest_checkpoint(str(tmp_path))
    with pytest.raises((ValueError, FileNotFoundError), match='fix it, delete it to start afresh'):
        set_resume(Config(dict(work_dir=str(tmp_path))), 'auto')


def test_safetensors_random_bytes_or_a_pickle_are_named(tmp_path):
    from jetvit_mm.models import JetViT
    from jetvit_mm.models.checkpoints import read_checkpoint, read_state_dict
    noise = tmp_path / 'noise.safetensors'
    noise.write_bytes(torch.randint(0, 256, (4096, ), dtype=torch.uint8).numpy().tobytes())
    disguised = tmp_path / 'pickle.safetensors'
    torch.save({'w': torch.ones(2)}, disguised)
    legacy = tmp_path / 'legacy_pickle.safetensors'
    with open(legacy, 'wb') as f:
        pickle.dump({'w': 1}, f, protocol=2)
    for read in (read_state_dict, read_checkpoint, lambda p: JetViT(**TINY, checkpoint=p)):
        with pytest.raises(ValueError, match=r'noise\.safetensors is not a readable \.safetensors file'):
            read(noise)
        for path, kind in ((disguised, 'a zip archive'), (legacy, 'a pickle')):
            with pytest.raises(ValueError, match=rf'{path.name} is named \.safetensors but holds a torch checkpoint '
                                                 rf'\({kind}\)'):
                read(path)


def test_legacy_checkpoints_pass_the_test_and_search_tools_checks(tmp_path):
    """tools/test.py (check_checkpoint_fits, set_resume's seed) and tools/search.py (the saved distill objective,
    the content fingerprint) read a checkpoint's meta mapped: a legacy file is read whole instead of being refused."""
    from jetvit_mm.mm.checkpoint import check_checkpoint_fits
    from jetvit_mm.mm.search_identity import state_fingerprint
    from jetvit_mm.mm.search_runner import build_downstream_model, saved_distill_objective
    cfg = Config.fromfile(str(PROBE))
    model = build_downstream_model(cfg)
    path = tmp_path / 'legacy.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {'seed': 3}}, path, _use_new_zipfile_serialization=False)
    check_checkpoint_fits(model, str(path), PROBE.name)
    assert saved_distill_objective(str(path))['loss'] == 'mse'
    assert state_fingerprint(str(path)).startswith('sha256:')


def test_search_reads_a_given_latency_table_before_any_work(files):
    """A bad --latency-table is refused before the supernet is loaded or a state file written."""
    table = files['tmp'] / 'latency_table.json'
    table.write_text('{"base": 1.0, "F": 2.0}')
    work = files['tmp'] / 'search'
    with pytest.raises(ValueError, match=r'latency_table\.json: a latency table needs non-negative milliseconds'):
        load_tool('search').main([files['cfg'], files['ckpt'], '--metric', 'distill_loss', '--latency-table',
                                  str(table), '--work-dir', str(work)])
    assert not work.exists()


# ============================================================================= issue 29: models (brief H5)
@pytest.mark.parametrize('window_size', [float('nan'), 0, -2, 2.5, True, '8'])
def test_a_bad_window_size_is_named_not_blamed_on_the_mixer_contract(window_size):
    """``window_size`` NaN, 0, negative, non-integer: a ValueError naming the argument, the value and what is valid
    (it was reported as a broken mixer contract, or passed)."""
    import re

    from jetvit_mm.models import JetViT
    from jetvit_mm.models.mixers import DEFAULT_MIXERS, MixerContractError
    expected = (r"window_size must be >= 1, an int \(the W mixer's window side, in patches\), got "
                + re.escape(repr(window_size)))
    for build in (lambda: JetViT(**dict(TINY, window_size=window_size)),
                  lambda: JetViT(mixers=dict(DEFAULT_MIXERS, W=dict(type='WindowAttention', window_size=window_size)),
                                 **{k: v for k, v in TINY.items() if k != 'window_size'})):
        with pytest.raises(ValueError, match=expected) as error:
            build()
        assert not isinstance(error.value, MixerContractError)
# ============================================================================= end of issue 29: models (brief H5)
