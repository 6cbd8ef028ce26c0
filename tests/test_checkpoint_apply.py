"""One way to apply weights (issue 47): every caller that puts checkpoint weights into a model goes through
:func:`~jetvit_mm.models.checkpoint.apply_checkpoint`, which decodes and checks each JetViT's saved spec once; each
tool reads its checkpoint files once; the search checks the spec its supernet checkpoint saved."""
import ast
import importlib.util
from collections import Counter
from pathlib import Path

import pytest
import torch

from jetvit_mm.models import arch
from jetvit_mm.models.arch import SPEC_KEY, ArchSpec
from jetvit_mm.models.checkpoint import CheckpointMismatch, apply_checkpoint, read, save
from jetvit_mm.models.jetvit import JetViT
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.supernet import JetViTSupernet

from .conftest import REPO

TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2,
            mixers=default_mixers(W=dict(window_size=4)))
PROBE = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'

# Where weights are put into a module other than by the applier: copies between modules in memory (a mixer
# inherits its teacher's q/k/v/o; the kernel check gives the fast model the reference's weights), and an FSDP2 model's
# shards (DTensors, which only torch's distributed helpers fill; the runner then applies the model's own state).
IN_MEMORY = {
    ('jetvit_mm/models/checkpoint/io.py', 'model.load_state_dict(report.state, strict=False)'),  # the applier
    ('jetvit_mm/models/jetvit.py', 'mixer.proj.load_state_dict(attn.proj.state_dict())'),
    ('jetvit_mm/models/supernet.py', 'mixer.qkv.load_state_dict(teacher_attn.qkv.state_dict())'),
    ('jetvit_mm/models/supernet.py', 'mixer.proj.load_state_dict(teacher_attn.proj.state_dict())'),
    ('jetvit_mm/benchmark/kernel_check.py', 'fast.load_state_dict(reference.state_dict())'),
    ('jetvit_mm/mm/checkpoint/fsdp.py', "set_model_state_dict(model, state['model'])"),
    ('jetvit_mm/mm/checkpoint/fsdp.py', "set_model_state_dict(model, checkpoint['state_dict'], options=_FULL)"),
}
# Every caller that applies a checkpoint's weights (a file, or a state dict from another model).
APPLIERS = {
    'jetvit_mm/models/jetvit.py': ['JetViT.load_checkpoint'],
    'jetvit_mm/models/supernet.py': ['JetViTSupernet.extract_subnet'],
    'jetvit_mm/models/depth_anything.py': ['JetViTDepthAnything.load_checkpoint'],
    'jetvit_mm/models/heads/dpt.py': ['DPTHead.load_checkpoint'],
    'jetvit_mm/benchmark/distill.py': ['build_distiller'],
    'jetvit_mm/mm/engine/runner.py': ['JetViTRunner.load_checkpoint'],
    'jetvit_mm/mm/engine/launch.py': ['build_runner'],
    'jetvit_mm/mm/models/distiller.py': ['FeatureDistiller.__init__', 'FeatureDistiller.meta_state'],
    'jetvit_mm/mm/search/scoring.py': ['load_supernet', 'load_downstream_heads'],
    'jetvit_mm/mm/apis/infer.py': ['load_model'],
    'jetvit_mm/mm/apis/onnx_model.py': ['build_export_module'],
}


def python_files():
    for folder in ('jetvit_mm', 'tools'):
        for path in sorted((REPO / folder).rglob('*.py')):
            yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(), str(path))


def calls_named(tree: ast.AST, *names: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, 'id', None)
            if name in names:
                yield node


def test_every_load_of_weights_is_the_one_applier():
    """``load_state_dict`` (and FSDP2's ``set_model_state_dict``) is called in the applier and, elsewhere, only to
    copy weights between modules in memory; each caller that applies a checkpoint calls the applier; the spec is
    checked in the applier only (and in ``set_extra_state``, for the frameworks' own loaders)."""
    found = {(path, ast.unparse(call)) for path, tree in python_files()
             for call in calls_named(tree, 'load_state_dict', 'set_model_state_dict')}
    assert found == IN_MEMORY
    for path, tree in python_files():
        functions = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    owner = f'{node.name}.' if isinstance(node, ast.ClassDef) else ''
                    functions[owner + child.name] = child
        for name in APPLIERS.get(path, []):
            assert any(True for _ in calls_named(functions[name], 'apply_checkpoint')), f'{path}: {name}'
        checks = {f for f, node in functions.items() if any(True for _ in calls_named(node, 'check_spec'))}
        expected = {'jetvit_mm/models/checkpoint/io.py': {'_map_jetvits'},
                    'jetvit_mm/models/jetvit.py': {'JetViT.set_extra_state'}}
        assert checks == expected.get(path, set()), path


@pytest.fixture
def counted(monkeypatch):
    """Counts of spec decodes (``ArchSpec.from_tensor``), spec checks and ``set_extra_state`` calls."""
    counts = Counter()
    from_tensor, check_spec, set_extra_state = ArchSpec.from_tensor.__func__, arch.check_spec, JetViT.set_extra_state

    def decode(cls, *args, **kwargs):
        counts['decoded'] += 1
        return from_tensor(cls, *args, **kwargs)

    def check(*args, **kwargs):
        counts['checked'] += 1
        return check_spec(*args, **kwargs)

    def extra(self, state):
        counts['set_extra_state'] += 1
        return set_extra_state(self, state)

    monkeypatch.setattr(ArchSpec, 'from_tensor', classmethod(decode))
    monkeypatch.setattr('jetvit_mm.models.checkpoint.io.check_spec', check)
    monkeypatch.setattr(JetViT, 'set_extra_state', extra)
    return counts


def test_the_spec_is_decoded_and_checked_once_per_load(tmp_path, counted):
    """A plain JetViT file, a whole model's runner checkpoint (its JetViT under ``backbone.``) and a distiller's (a
    teacher and a supernet): each JetViT's spec decoded and checked once, ``set_extra_state`` not called again."""
    from mmengine.config import Config
    from mmengine.registry import DefaultScope

    import jetvit_mm.mm  # noqa: F401
    from jetvit_mm.mm.registry import MODELS
    hybrid = JetViT(arch='LWLF', **TINY)
    save(dict(state_dict=hybrid.state_dict()), tmp_path / 'hybrid.pth')
    JetViT(arch='LWLF', checkpoint=tmp_path / 'hybrid.pth', **TINY)
    assert counted == {'decoded': 1, 'checked': 1}
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(Config.fromfile(str(PROBE)).model)
    save(dict(state_dict=model.state_dict()), tmp_path / 'probe.pth')
    counted.clear()
    apply_checkpoint(model, read(tmp_path / 'probe.pth'))
    assert counted == {'decoded': 1, 'checked': 1}
    teacher, student = JetViT(arch='FFFF', **TINY), JetViTSupernet(search_space='LW', **TINY)
    state = {**{f'teacher.{k}': v for k, v in teacher.state_dict().items()},
             **{f'student.{k}': v for k, v in student.state_dict().items()}}
    distiller = torch.nn.Module()
    distiller.teacher, distiller.student = JetViT(arch='FFFF', **TINY), JetViTSupernet(search_space='LW', **TINY)
    counted.clear()
    apply_checkpoint(distiller, state)
    assert counted == {'decoded': 2, 'checked': 2}
    assert torch.equal(distiller.student.blocks[0].attn.candidates.W.qkv.weight,
                       student.blocks[0].attn.candidates.W.qkv.weight)
    counted.clear()
    JetViT(arch='LWLF', **TINY).load_state_dict(hybrid.state_dict())  # torch's own load (mmengine's loaders)
    assert counted == {'decoded': 1, 'set_extra_state': 1}


def test_one_report_names_missing_unexpected_and_mis_shaped_keys(tmp_path):
    """Strict: one error naming the file, the model, every kind of key that does not fit and what to do, before any
    tensor is copied (a ValueError, bad input for the tools, and a RuntimeError, as torch's strict load); not strict:
    what fits loads and the report holds the rest."""
    source = JetViT(arch='LWLF', **TINY).state_dict()
    state = {k: v for k, v in source.items() if k != 'blocks.1.norm2.bias'}
    state.update({'blocks.0.attn.extra': torch.ones(1), 'norm.weight': torch.ones(7)})
    save(dict(state_dict=state), tmp_path / 'bad.pth')
    model = JetViT(arch='LWLF', **TINY)
    before, norm = model.blocks[0].mlp.fc1.weight.clone(), model.norm.weight.clone()
    with pytest.raises(CheckpointMismatch) as error:
        apply_checkpoint(model, read(tmp_path / 'bad.pth'))
    assert isinstance(error.value, ValueError) and isinstance(error.value, RuntimeError)
    assert str(error.value).splitlines() == [
        f'{tmp_path / "bad.pth"} (vit format) does not fit JetViT(dinov3_vits16, embed_dim=32, depth=4, num_heads=2)',
        'missing keys: blocks.1.norm2.bias', 'unexpected keys: blocks.0.attn.extra',
        'shape mismatches: norm.weight: checkpoint (7,) vs model (32,)',
        'give a checkpoint of this model, or build the model (its config) the checkpoint was saved from']
    assert torch.equal(model.blocks[0].mlp.fc1.weight, before)
    report = apply_checkpoint(model, state, strict=False)
    assert (report.missing, report.unexpected) == (['blocks.1.norm2.bias'], ['blocks.0.attn.extra'])
    assert torch.equal(model.blocks[0].mlp.fc1.weight, source['blocks.0.mlp.fc1.weight'])
    assert 'norm.weight' not in report.state and torch.equal(model.norm.weight, norm)


def distillation_checkpoint(path: Path, spec: ArchSpec = None) -> Path:
    """A FeatureDistiller's runner checkpoint of a tiny {L, W} supernet (``spec``: the student's saved spec)."""
    torch.manual_seed(0)
    student, teacher = JetViTSupernet(search_space='LW', **TINY), JetViT(**TINY)
    state = {**{f'teacher.{k}': v for k, v in teacher.state_dict().items()},
             **{f'student.{k}': v for k, v in student.state_dict().items()}}
    if spec is not None:
        state[f'student.{SPEC_KEY}'] = spec.to_tensor()
    return save(dict(state_dict=state, meta={}), path)


def test_the_search_checks_the_spec_its_checkpoint_saved(tmp_path, counted):
    """load_supernet checks the saved spec (decoded once) instead of writing the model's own over it: one arch's
    weights are refused, as is a supernet of another window (naming the option to pass); one saved before specs
    loads."""
    from mmengine.config import Config

    import jetvit_mm.mm  # noqa: F401
    from jetvit_mm.mm.search.scoring import load_supernet
    cfg = Config(dict(model=dict(backbone=dict(TINY, type='JetViT'))))
    supernet, teacher = load_supernet(distillation_checkpoint(tmp_path / 'plain.pth'), cfg)
    assert counted['decoded'] == 2 and counted['checked'] == 2 and not counted['set_extra_state']
    assert supernet.search_space == ('LW', ) * 4
    built = JetViTSupernet(search_space='LW', **TINY).spec
    one_arch = ArchSpec(built.model_name, arch='LWLW', mixers=built.mixers)
    with pytest.raises(ValueError, match=r"one_arch\.pth holds a JetViT with arch 'LWLW', but this model is a "
                                         r"supernet"):
        load_supernet(distillation_checkpoint(tmp_path / 'one_arch.pth', one_arch), cfg)
    window = ArchSpec(built.model_name, search_space=built.search_space,
                      mixers=dict(built.mixers, W=dict(built.mixers['W'], window_size=8)))
    with pytest.raises(ValueError, match=r'window\.pth was distilled with mixers\.W\.window_size=8, but the config\'s '
                                         r'backbone has mixers\.W\.window_size=4: pass --cfg-options '
                                         r'model\.backbone\.mixers\.W\.window_size=8'):
        load_supernet(distillation_checkpoint(tmp_path / 'window.pth', window), cfg)
    old = read(distillation_checkpoint(tmp_path / 'old.pth')).state
    torch.save({'state_dict': {k: v for k, v in old.items() if not k.endswith(SPEC_KEY)}}, tmp_path / 'old.pth')
    load_supernet(str(tmp_path / 'old.pth'), cfg)


@pytest.mark.integration
def test_each_tool_reads_its_checkpoints_once(tmp_path):
    """scripts/measure_checkpoint_load.py: tools/infer.py, tools/test.py, tools/train.py --resume and tools/search.py
    (its supernet checkpoint and its --head-checkpoint) each read every checkpoint file they are given once."""
    spec = importlib.util.spec_from_file_location('measure', REPO / 'scripts' / 'measure_checkpoint_load.py')
    measure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(measure)
    results = measure.measure(tmp_path)
    assert set(results) == {'tools/infer.py', 'tools/test.py', 'tools/train.py --resume', 'tools/search.py'}
    reads = {(tool, name): n['reads'] for tool, found in results.items() for name, n in found['opens'].items()}
    assert len(reads) == 5 and set(reads.values()) == {1}, reads
