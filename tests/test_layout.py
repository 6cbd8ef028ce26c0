"""Names that say what runs, rooms of one concern (issue 47, item 3): one public definition per name in the package
(the registered OpenMMLab types share their pure class's name on purpose), package ``__init__`` files that only
import, tools that neither edit ``sys.path`` nor call CPython's private functions, and the moved packages pointing to
their new spelling."""
import ast
import importlib
from collections import defaultdict
from pathlib import Path

import pytest

from .conftest import REPO

PACKAGE = REPO / 'jetvit_mm'
# the registered backbones of jetvit_mm/mm/models/backbones.py: the pure classes under their registry names
REGISTERED_TWINS = {'JetViT', 'JetViTSupernet', 'TokenClusteringJetViT'}
MOVED = {'jetvit_mm.method': ('jetvit_mm.pipeline', 'jetvit_mm.demo'),
         'jetvit_mm.testing': ('jetvit_mm.demo.context_seg',)}
# CPython's private functions a tool or the package must not lean on
PRIVATE_CALLS = ('atexit._run_exitfuncs', 'sys._getframe')


def modules(root: Path):
    for path in sorted(root.rglob('*.py')):
        yield path, ast.parse(path.read_text(), filename=str(path))


def test_each_public_name_is_defined_once_in_the_package():
    where = defaultdict(list)
    for path, tree in modules(PACKAGE):
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith('_'):
                where[node.name].append(str(path.relative_to(REPO)))
    twice = {name: files for name, files in where.items() if len(files) > 1 and name not in REGISTERED_TWINS}
    assert not twice, twice


def test_tools_leave_sys_path_alone_and_call_no_private_cpython_function():
    found = []
    for root in (REPO / 'tools', PACKAGE):
        for path, tree in modules(root):
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute):
                    text = ast.unparse(node)
                    if text.startswith('sys.path.') or text in PRIVATE_CALLS:
                        found.append(f'{path.relative_to(REPO)}:{node.lineno}: {text}')
    assert not found, found


@pytest.mark.parametrize('old, new', sorted(MOVED.items()))
def test_a_moved_package_names_its_new_spelling(old, new):
    with pytest.raises(ImportError) as raised:
        importlib.import_module(old)
    assert all(name in str(raised.value) for name in new), raised.value


def test_the_adapters_checkpoint_package_only_imports():
    """``jetvit_mm/mm/checkpoint``: one module per concern, an ``__init__`` of imports (and its ``__all__``)."""
    tree = ast.parse((PACKAGE / 'mm' / 'checkpoint' / '__init__.py').read_text())
    body = tree.body[1:] if ast.get_docstring(tree) else tree.body
    assert all(isinstance(node, (ast.Import, ast.ImportFrom)) or
               (isinstance(node, ast.Assign) and [t.id for t in node.targets] == ['__all__']) for node in body)


def test_the_removed_weight_loader_names_the_one_applier():
    """``JetViT.load_jetvit_state_dict`` (before 2026-12-07) is refused with the spelling that replaced it."""
    from jetvit_mm.models import JetViT
    from jetvit_mm.models.mixers import default_mixers

    model = JetViT('dinov3_vits16', arch='LWF', embed_dim=32, depth=3, num_heads=2,
                   mixers=default_mixers(W=dict(window_size=2)))
    with pytest.raises(AttributeError, match=r'apply_checkpoint\(model, state_dict\)'):
        model.load_jetvit_state_dict(model.state_dict())
