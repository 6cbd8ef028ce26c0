"""The pure core runs without OpenMMLab: with mmengine, mmcv, mmseg and mmdet made unimportable in a fresh
interpreter, jetvit_mm.models, search, distill, benchmark and depth build, run, load a plain weight file and refuse
an unsafe pickle with their own error; no pure module imports jetvit_mm.mm or OpenMMLab (not even lazily), and the
package's import graph has no cycle."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import HANG_GUARD_S, REPO

PACKAGE = REPO / 'jetvit_mm'
OPENMMLAB = ('mmengine', 'mmcv', 'mmseg', 'mmdet')
PURE = ('models', 'search', 'distill', 'benchmark', 'depth', 'deploy', 'visual', 'process_state')

BLOCKED_RUN = r'''
import importlib.abc, os, pickle, sys, warnings
BLOCKED = {blocked!r}


class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED:
            raise ImportError(f'{{name}} is blocked in this test')
        return None


sys.meta_path.insert(0, Blocker())
try:
    import mmengine  # noqa: F401
    raise SystemExit('the blocker does not block')
except ImportError:
    pass

import torch
from jetvit_mm.benchmark import count_flops
from jetvit_mm.depth import ScaleShiftInvariantLoss, affine_invariant_errors
from jetvit_mm.distill import distill_loss
from jetvit_mm.models import JetViT
from jetvit_mm.models.checkpoint import UnsafeCheckpointError
from jetvit_mm.models.supernet import JetViTSupernet
from jetvit_mm.search import search_step1
from jetvit_mm.search.run import SearchSettings
from jetvit_mm.models.mixers import default_mixers

tiny = dict(model_name='dinov3_vits16', embed_dim=32, depth=3, num_heads=2,
            mixers=default_mixers(W=dict(window_size=2)))
model = JetViT(arch='LWF', **tiny).eval()
x = torch.randn(1, 3, 64, 64)
with torch.no_grad():
    out = model(x)[0]
assert out.shape == (1, 32, 4, 4) and torch.isfinite(out).all()
assert count_flops(model, (64, 64))['total'] > 0

# a plain weight file loads; the arch spec travels with it and is checked
torch.save(model.state_dict(), {tmp!r} + '/plain.pth')
again = JetViT(arch='LWF', checkpoint={tmp!r} + '/plain.pth', **tiny).eval()
with torch.no_grad():
    assert torch.equal(again(x)[0], out)
try:
    JetViT(arch='LFW', checkpoint={tmp!r} + '/plain.pth', **tiny)
    raise SystemExit('another arch was accepted')
except ValueError as error:
    assert "holds a JetViT with arch 'LWF'" in str(error), error

# an unsafe pickle is refused with the core's own error, and its payload never runs
class Payload:
    def __reduce__(self):
        return (os.system, ('touch ' + {tmp!r} + '/ran',))


torch.save(dict(state_dict=model.state_dict(), extra=Payload()), {tmp!r} + '/unsafe.pth')
try:
    JetViT(arch='LWF', checkpoint={tmp!r} + '/unsafe.pth', **tiny)
    raise SystemExit('an unsafe pickle was accepted')
except UnsafeCheckpointError as error:
    assert isinstance(error, pickle.UnpicklingError) and 'import jetvit_mm.mm' in str(error), error
assert not os.path.exists({tmp!r} + '/ran')

supernet = JetViTSupernet(search_space='LW', **tiny)
supernet.set_arch('WLW')
assert torch.equal(supernet.extract_subnet('WLW').state_dict()['blocks.0.attn.qkv.weight'],
                   supernet.blocks[0].attn.candidates['W'].qkv.weight)
feats = supernet.forward_intermediates(x, output_fmt='NLC')
assert distill_loss('activation', feats, model.forward_intermediates(x, output_fmt='NLC')).item() > 0
assert search_step1(lambda arch: float(arch.count('W')), 3, min_gain=0.5).best_arch == 'WWW'
assert SearchSettings(stage=1, metric='m', higher_is_better=True).beam_width == 4
assert ScaleShiftInvariantLoss()(torch.rand(1, 8, 8) + 1, torch.rand(1, 8, 8) + 1).item() >= 0
assert affine_invariant_errors(torch.rand(8, 8) + 1, torch.rand(8, 8) + 1) is not None
loaded = sorted(m for m in sys.modules if m.split('.')[0] in BLOCKED or m.startswith('jetvit_mm.mm'))
assert not loaded, loaded
print('pure core ok')
'''


@pytest.mark.integration
def test_core_runs_with_openmmlab_blocked(tmp_path):
    script = BLOCKED_RUN.format(blocked=OPENMMLAB, tmp=str(tmp_path))
    proc = subprocess.run([sys.executable, '-c', script], cwd=REPO, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.returncode == 0 and 'pure core ok' in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def _imports(path: Path, modules: set) -> set:
    """The jetvit_mm modules (and top-level packages elsewhere) that ``path`` imports anywhere, functions included."""
    name = _module_name(path)
    package = name if path.name == '__init__.py' else name.rsplit('.', 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                anchor = package.split('.')
                anchor = anchor[:len(anchor) - node.level + 1]
                base = '.'.join(anchor + ([node.module] if node.module else []))
            for alias in node.names:  # ``from pkg import submodule`` imports the submodule
                found.add(f'{base}.{alias.name}' if f'{base}.{alias.name}' in modules else base)
    return found


def _graph() -> dict:
    files = sorted(PACKAGE.rglob('*.py'))
    modules = {_module_name(f) for f in files}
    return {_module_name(f): _imports(f, modules) for f in files}


def test_pure_folders_never_import_openmmlab_or_the_adapter():
    graph = _graph()
    offending = {module: sorted(i for i in imports if i.split('.')[0] in OPENMMLAB or i.startswith('jetvit_mm.mm'))
                 for module, imports in graph.items() if module.split('.')[1:2] and module.split('.')[1] in PURE}
    assert {m: i for m, i in offending.items() if i} == {}
    assert 'jetvit_mm.mm.registry' in graph['jetvit_mm.mm.engine.hooks']  # a relative import (..registry), resolved


def test_import_graph_has_no_cycle():
    graph = _graph()
    edges = {m: {i for i in imports if i in graph and i != m} for m, imports in graph.items()}
    done, stack = set(), []

    def visit(module):
        if module in stack:
            return stack[stack.index(module):] + [module]
        if module in done:
            return None
        stack.append(module)
        for target in sorted(edges[module]):
            cycle = visit(target)
            if cycle:
                return cycle
        stack.pop()
        done.add(module)
        return None

    for module in sorted(edges):
        cycle = visit(module)
        assert cycle is None, ' -> '.join(cycle)
    # the check can find one: the old lazy import of jetvit_mm.mm.checkpoint from the core's io.py was one
    edges['jetvit_mm.models.checkpoint.io'].add('jetvit_mm.mm.checkpoint')
    done.clear()
    assert any(visit(m) for m in sorted(edges))


def test_the_min_torch_test_list_names_files_that_import_no_openmmlab():
    """tests/pure_core_tests.txt (what `make test-min-torch` runs without OpenMMLab): every file exists and imports
    none of mmengine, mmcv, mmseg, mmdet or jetvit_mm.mm, anywhere in it (its fixtures and helpers included)."""
    listed = [line.strip() for line in (REPO / 'tests' / 'pure_core_tests.txt').read_text().splitlines()
              if line.strip() and not line.startswith('#')]
    assert len(listed) >= 10 and len(set(listed)) == len(listed)
    for name in listed:
        path = REPO / name
        assert path.is_file(), name
        imports = {i for node in ast.walk(ast.parse(path.read_text()))
                   for i in ([a.name for a in node.names] if isinstance(node, ast.Import) else
                             [node.module or ''] if isinstance(node, ast.ImportFrom) else [])}
        assert not {i for i in imports if i.split('.')[0] in OPENMMLAB or i.startswith('jetvit_mm.mm')}, name
