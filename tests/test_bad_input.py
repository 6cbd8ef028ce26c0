"""A user trying to break each tool and API: every bad input is refused before any work, with an error that names the
input and what it accepts, and nothing is left behind that blocks the corrected command."""
import argparse
import functools
import importlib.util
import json
import pickle
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

import jetvit_mm.mm  # noqa: F401  (registers the plugin, as a config's custom_imports does)
from jetvit_mm.models.checkpoint import apply_checkpoint
from jetvit_mm.models.checkpoint import read as read_checkpoint
from jetvit_mm.models.mixers import default_mixers

from .conftest import REPO

PROBE = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'
TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2,
            mixers=default_mixers(W=dict(window_size=2)), arch='LWLF')


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
    ('export_onnx', '{cfg} --out {tmp}/m.onnx --batch 2', r'--batch sets the batch of a --fixed-size export'),
    ('export_onnx', '{cfg} --out {tmp}/m.onnx --fixed-size 64 64 --check-grid 5 5',
     r'--check-grid: a --fixed-size export takes one input size'),
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
    from jetvit_mm.mm.engine.launch import write_metrics
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
    from jetvit_mm.mm.datasets.data_checks import DataInputError, build_checked_dataset
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
    from jetvit_mm.mm.datasets.data_checks import DataInputError
    from jetvit_mm.mm.engine.launch import build_runner
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
    from .fixtures.datasets import make_coco
    root = make_coco(tmp_path / 'coco', splits={'train2017': 1, 'val2017': 1, 'test2017': 0})
    good = root / 'annotations' / 'instances_val2017.json'
    truncated = tmp_path / 'truncated.json'
    truncated.write_text(good.read_text()[:100])
    keyless = tmp_path / 'keyless.json'
    keyless.write_text(json.dumps({'images': json.loads(good.read_text())['images']}))
    return dict(root=root, truncated=truncated, keyless=keyless)


def test_coco_annotations_truncated_or_keyless_are_named(coco):
    from jetvit_mm.mm.datasets.data_checks import DataInputError, build_checked_dataset, build_checked_evaluator
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
    from jetvit_mm.mm.engine.launch import latest_checkpoint, set_resume
    (tmp_path / 'last_checkpoint').write_bytes(content)
    with pytest.raises((ValueError, FileNotFoundError), match=rf'last_checkpoint .*{pattern}'):
        latest_checkpoint(str(tmp_path))
    with pytest.raises((ValueError, FileNotFoundError), match='fix it, delete it to start afresh'):
        set_resume(Config(dict(work_dir=str(tmp_path))), 'auto')


def test_safetensors_random_bytes_or_a_pickle_are_named(tmp_path):
    from jetvit_mm.models import JetViT
    from jetvit_mm.models.checkpoint import read as read_file
    noise = tmp_path / 'noise.safetensors'
    noise.write_bytes(torch.randint(0, 256, (4096, ), dtype=torch.uint8).numpy().tobytes())
    disguised = tmp_path / 'pickle.safetensors'
    torch.save({'w': torch.ones(2)}, disguised)
    legacy = tmp_path / 'legacy_pickle.safetensors'
    with open(legacy, 'wb') as f:
        pickle.dump({'w': 1}, f, protocol=2)
    for read in (read_file, lambda p: JetViT(**TINY, checkpoint=p)):
        with pytest.raises(ValueError, match=r'noise\.safetensors is not a readable \.safetensors file'):
            read(noise)
        for path, kind in ((disguised, 'a zip archive'), (legacy, 'a pickle')):
            with pytest.raises(ValueError, match=rf'{path.name} is named \.safetensors but holds a torch checkpoint '
                                                 rf'\({kind}\)'):
                read(path)


def test_legacy_checkpoints_pass_the_test_and_search_tools_checks(tmp_path):
    """A legacy (non-zip) checkpoint passes tools/test.py's fit to the model, and the search's saved distill
    objective and content fingerprint, which read a checkpoint given by its path mapped: it is read whole instead of
    being refused."""
    from jetvit_mm.mm.search.identity import state_fingerprint
    from jetvit_mm.mm.search.scoring import build_downstream_model, saved_distill_objective
    cfg = Config.fromfile(str(PROBE))
    model = build_downstream_model(cfg)
    path = tmp_path / 'legacy.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {'seed': 3}}, path, _use_new_zipfile_serialization=False)
    apply_checkpoint(model, read_checkpoint(path), allow_unexpected=True, load=False)  # tools/test.py's check
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


# ============================================================ issue 29 (search): tools/search.py on an empty val set
def test_search_refuses_an_empty_val_set_naming_it_before_any_work(files):
    """mmengine would fail on 'need at least one array to concatenate', naming nothing; the search refuses the val
    set with its dataset, data root and where it looked, before any checkpoint is scored or a state file written."""
    from jetvit_mm.mm.datasets.data_checks import DataInputError
    root = files['tmp'] / 'empty_cityscapes'
    (root / 'leftImg8bit' / 'val').mkdir(parents=True)
    (root / 'gtFine' / 'val').mkdir(parents=True)
    work = files['tmp'] / 'search'
    for metric in ('mIoU', 'distill_loss'):
        # refused by the runner's data checks as it builds the config's val_dataloader (the search loop's own)
        with pytest.raises(DataInputError, match=r'the dataset CityscapesDataset\(data_root=.*empty_cityscapes.*\) has '
                                                 r'no samples: it looked in .*leftImg8bit/val'):
            load_tool('search').main([files['cfg'], files['ckpt'], '--metric', metric, '--work-dir', str(work),
                                      '--cfg-options', f'val_dataloader.dataset.data_root={root}'])
        assert not list(work.rglob('search_state.json'))  # the runner made its work dir (its log), nothing scored
# ============================================================ end of issue 29 (search)


# ====================================================================== H2 (issue 29): state dicts, specs and conv keys
def test_a_state_dict_cast_to_fp16_or_bf16_loads_with_its_spec(tmp_path):
    """A state dict cast whole (``{k: v.half()}``) holds its arch spec as fp16 bytes; it loads, spec checked."""
    from jetvit_mm.models import JetViT
    model = JetViT(**TINY)
    for dtype in (torch.float16, torch.bfloat16):
        state = {k: v.to(dtype) for k, v in model.state_dict().items()}
        path = tmp_path / f'{dtype}.pth'
        torch.save(state, path)
        loaded = JetViT(**TINY, checkpoint=path)
        assert torch.equal(loaded.state_dict()['blocks.0.mlp.fc1.weight'], state['blocks.0.mlp.fc1.weight'].float())
        JetViT(**TINY).load_state_dict(state)  # torch's own load (mmengine's loaders) reads the spec too
        with pytest.raises(ValueError, match=r"has arch 'LWLW'.*build it with arch='LWLF'"):
            JetViT(**{**TINY, 'arch': 'LWLW'}, checkpoint=path)  # the spec is read and still checked


def test_a_spec_cast_to_a_dtype_that_loses_its_bytes_is_named(tmp_path):
    from jetvit_mm.models import JetViT
    state = JetViT(**TINY).state_dict()
    state['_extra_state'] = state['_extra_state'].float() + 0.5
    with pytest.raises(ValueError, match=r'_extra_state is not a JetViT arch spec: expected a 1-D uint8 tensor .* '
                                         r'got dtype torch.float32'):
        JetViT(**TINY).load_state_dict(state)


def l_conv_names(model) -> dict:
    """``{layer: [names of its L mixer's new parameters]}``."""
    out = {}
    for name in model.new_parameter_names():
        out.setdefault(int(name.split('.')[1]), []).append(name)
    return out


def test_partial_conv_keys_without_a_spec_are_refused_naming_the_missing_keys(tmp_path):
    """A specless state dict with layer 0's L conv keys but not layer 2's loaded with layer 2's conv as initialised
    (zero); a teacher file (no conv keys at all) still loads."""
    import re

    from jetvit_mm.mm.registry import MODELS
    from jetvit_mm.models import JetViT
    model = JetViT(**TINY)
    conv = l_conv_names(model)
    assert sorted(conv) == [0, 2], conv  # TINY's arch LWLF: L at layers 0 and 2
    state = {k: v for k, v in model.state_dict().items() if k != '_extra_state'}
    path = tmp_path / 'partial.pth'
    torch.save({k: v for k, v in state.items() if k not in conv[2]}, path)
    missing = ', '.join(sorted(conv[2]))
    with pytest.raises(RuntimeError, match=rf'partial\.pth.*\nmissing keys: {re.escape(missing)}'):
        JetViT(**TINY, checkpoint=path)
    with pytest.raises(RuntimeError, match=re.escape(missing)):
        apply_checkpoint(JetViT(**TINY), {k: v for k, v in state.items() if k not in conv[2]})
    teacher = tmp_path / 'teacher.pth'  # a teacher's file: none of the conv keys, no spec
    torch.save({k: v for k, v in state.items() if k not in conv[0] + conv[2]}, teacher)
    JetViT(**TINY, checkpoint=teacher)
    # tools/test.py's check, on a downstream model with the JetViT under backbone.
    with DefaultScope.overwrite_default_scope('mmseg'):
        downstream = MODELS.build(Config.fromfile(str(PROBE)).model)  # its backbone: LWLF
    conv = {layer: [f'backbone.{n}' for n in names] for layer, names in l_conv_names(downstream.backbone).items()}
    full = {k: v for k, v in downstream.state_dict().items() if not k.endswith('_extra_state')}
    runner_file = tmp_path / 'runner.pth'
    for dropped in (conv[0] + conv[2], conv[2]):
        torch.save({'state_dict': {k: v for k, v in full.items() if k not in dropped}}, runner_file)
        fits = functools.partial(apply_checkpoint, downstream, read_checkpoint(runner_file), allow_unexpected=True,
                                 load=False)
        if dropped == conv[2]:
            with pytest.raises(RuntimeError, match=rf'runner\.pth does not fit .*\nmissing keys: .*'
                                                   rf'{re.escape(conv[2][0])}'):
                fits()
        else:
            fits()
# ==================================================================== end of H2 (issue 29)


# ============================================================================================================
# issue 29, tools and images (i29-tools): an image of an unusable size is named with its size and the limit; the
# export tool tries its --out before any work
# ============================================================================================================
def _png_claiming(path: Path, width: int, height: int) -> Path:
    """A PNG file whose header claims ``width`` x ``height`` pixels (its data holds a few bytes only)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff)

    header = struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    path.write_bytes(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', header) + chunk(b'IDAT', zlib.compress(b'\0' * 16))
                     + chunk(b'IEND', b''))
    return path


@pytest.fixture
def bad_images(tmp_path):
    """A header claiming 100000 x 100000 pixels (above OpenCV's 2^30), and a real 1 x 4000 image."""
    import cv2
    import numpy as np

    thin = tmp_path / 'thin.png'
    cv2.imwrite(str(thin), np.full((1, 4000, 3), 128, np.uint8))
    return dict(huge=_png_claiming(tmp_path / 'huge.png', 100000, 100000), thin=thin)


HUGE = r'huge\.png: its header claims 100000x100000 pixels .* reads at most 1073741824 pixels'


def _needed(scale_long: float) -> int:
    """The short side that the 1 x 4000 image needs to keep one pixel through a keep-ratio resize to a long side of
    ``scale_long``: 1 * s / 4000 rounds to 1 from s >= 4000 / (2 * long)."""
    import math
    return math.ceil(4000 / (2 * scale_long))


def test_infer_names_an_image_too_large_or_too_thin(bad_images, tmp_path):
    """tools/infer.py (the probe's test pipeline resizes to a long side of 128): the file, its size and the limit."""
    import re
    infer = load_tool('infer')
    thin = rf'thin\.png \(1x4000 pixels.*Resize.*short side of at least {_needed(128)} pixels'
    for name, pattern in (('huge', HUGE), ('thin', thin)):
        with pytest.raises(SystemExit) as exit_:
            infer.main([str(PROBE), 'none', str(bad_images[name]), '--out-dir', str(bad_images[name].parent / 'o')])
        assert re.search(pattern, str(exit_.value.code)), exit_.value.code


def test_dataset_names_an_image_too_large_or_too_thin(bad_images, tmp_path):
    """The datasets the tools build (build_checked_dataset): the header is checked before decoding, and a pipeline
    step that fails on the image names it (the val pipeline's Resize, the train pipeline's RandomResize at its
    smallest ratio 0.75)."""
    import shutil

    from jetvit_mm.mm.datasets.data_checks import build_checked_dataset

    from .fixtures.datasets import make_cityscapes
    root = make_cityscapes(tmp_path / 'cityscapes', splits={'train': 2, 'val': 2}, size=(64, 128), seed=0)
    cfg = Config.fromfile(str(PROBE))
    for split, loader, long_side in (('val', cfg.val_dataloader, 128), ('train', cfg.train_dataloader, 128 * 0.75)):
        first, second = sorted((root / 'leftImg8bit' / split).rglob('*.png'))
        shutil.copy(bad_images['huge'], first)
        shutil.copy(bad_images['thin'], second)
        with DefaultScope.overwrite_default_scope('mmseg'):
            dataset = build_checked_dataset(dict(loader.dataset.to_dict(), data_root=str(root)))
        paths = [dataset.get_data_info(i)['img_path'] for i in range(len(dataset))]
        with pytest.raises(ValueError, match=rf'{first.stem}.png: .*100000x100000 pixels .* 1073741824'):
            dataset[paths.index(str(first))]
        with pytest.raises(ValueError, match=rf'{second.stem}.png \(1x4000 pixels.*Resize.*short side of at '
                                             rf'least {_needed(long_side)} pixels'):
            dataset[paths.index(str(second))]


def test_depth_readers_name_an_image_whose_header_is_too_large(bad_images, tmp_path):
    """DA-2K reads each image's size when it is built; a Cityscapes disparity PNG is read by PIL: both name it."""
    from jetvit_mm.depth.formats import read_cityscapes_depth, read_da2k_annotations
    images = tmp_path / 'da2k'
    images.mkdir()
    (images / 'huge.png').write_bytes(bad_images['huge'].read_bytes())
    ann = tmp_path / 'annotations.json'
    ann.write_text(json.dumps({'huge.png': [{'point1': [0, 0], 'point2': [1, 1], 'closer_point': 'point1'}]}))
    with pytest.raises(ValueError, match=HUGE):
        read_da2k_annotations(ann, images)
    camera = tmp_path / 'camera.json'
    camera.write_text(json.dumps({'extrinsic': {'baseline': 0.2}, 'intrinsic': {'fx': 2000.}}))
    with pytest.raises(ValueError, match=HUGE):
        read_cityscapes_depth(bad_images['huge'], camera)


def test_export_tool_tries_its_out_path_before_any_work(files, capsys):
    """A folder that takes no files although os.access says it is writable (/proc, for root) is refused when the
    arguments are read, not after the export."""
    import os
    if not os.path.isdir('/proc/self'):
        pytest.skip('needs Linux /proc')
    with pytest.raises(SystemExit) as exit_:
        load_tool('export_onnx').parse_args([files['cfg'], '--out', '/proc/jetvit_export_probe.onnx'])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and 'jetvit_export_probe.onnx cannot be' in err, err


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
    for build in (lambda: JetViT(**dict(TINY, mixers=default_mixers(W=dict(window_size=window_size)))),
                  lambda: JetViT(mixers=dict(DEFAULT_MIXERS, W=dict(type='WindowAttention', window_size=window_size)),
                                 **{k: v for k, v in TINY.items() if k != 'mixers'})):
        with pytest.raises(ValueError, match=expected) as error:
            build()
        assert not isinstance(error.value, MixerContractError)
# ============================================================================= end of issue 29: models (brief H5)


# ============================================================ arch letters: the config's, a plugin's included
def test_arch_options_take_the_configs_letters_a_plugins_included(files, capsys, monkeypatch):
    """``--arch`` / ``--step1-arch`` accept any capital letter at parsing and check it against the letters CONFIG's
    backbone declares: the example plugin's C and P pass that check (and fail later only on the empty checkpoint),
    an undeclared letter is named with the plugin's valid letters."""
    from jetvit_mm.cli import arch_string

    plugin = REPO / 'examples' / 'pooled_attention' / 'configs' / 'seg_pooled_tiny.py'
    monkeypatch.syspath_prepend(str(plugin.parents[1]))  # the plugin package, as its README installs it
    with pytest.raises(argparse.ArgumentTypeError, match=r"one capital mixer letter per layer.*got 'L-W'"):
        arch_string('L-W')
    with pytest.raises(SystemExit):
        load_tool('export_hybrid').main([str(plugin), files['ckpt'], '--arch', 'CPZL', '--out-dir', str(files['tmp'])])
    err = capsys.readouterr().err
    assert "--arch: arch 'CPZL' has invalid letter(s): 'Z' at layer 2" in err and 'C' in err.split('valid')[-1], err
    with pytest.raises(Exception) as error:  # past the letters: the (empty) checkpoint is what fails now
        load_tool('export_hybrid').main([str(plugin), files['ckpt'], '--arch', 'CPCL', '--out-dir', str(files['tmp'])])
    assert 'invalid letter' not in str(error.value) and not isinstance(error.value, SystemExit)


@pytest.mark.parametrize('tool, argv', [('train', '{cfg}'), ('test', '{cfg} {ckpt}'), ('search', '{cfg} {ckpt}')])
def test_a_typo_in_a_top_level_cfg_option_is_refused_naming_a_close_key(tool, argv, files):
    """``randomnes.seed=3`` was merged as a new key that nothing reads (the run then used no seed): refused before
    any work, naming the key and the close valid one."""
    module = load_tool(tool)
    before = sorted(p.name for p in files['tmp'].iterdir())
    argv = argv.format(**files).split() + ['--work-dir', str(files['tmp'] / 'w'), '--cfg-options', 'randomnes.seed=3']
    with pytest.raises(ValueError, match=r"--cfg-options randomnes\.seed=\.\.\.: .* has no top-level key 'randomnes'"
                                         r".*did you mean 'randomness' \(randomness\.seed=\.\.\.\)\?"):
        module.main(argv)
    assert sorted(p.name for p in files['tmp'].iterdir()) == before, 'nothing is written'


def test_cfg_options_may_add_runtime_keys_and_nested_keys():
    """A top-level key the runner reads although the config lacks it (randomness, env_cfg, ...) and a new key below
    the top level (a model argument) are accepted; an unknown top-level key without a close match names the keys."""
    from jetvit_mm.mm.engine.launch import read_config
    cfg = read_config(str(PROBE), {'randomness.seed': 3, 'experiment_name': 'x', 'model.backbone.drop_path_rate': 0.1})
    assert cfg.randomness.seed == 3 and cfg.experiment_name == 'x' and cfg.model.backbone.drop_path_rate == 0.1
    with pytest.raises(ValueError, match=r"no top-level key 'zzz'.* the config's keys: .*model"):
        read_config(str(PROBE), {'zzz': 1})
