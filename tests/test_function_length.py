"""No function of the package or the tools is over 60 logic lines (model constructors aside): long procedures are
split into named steps. Logic lines: the body's lines that hold code (no blank, comment-only or docstring lines)."""
import ast
import io
import tokenize
from pathlib import Path
from typing import Iterator, Set, Tuple

from .conftest import REPO

LIMIT = 60
ROOTS = ('jetvit_mm', 'tools')
# model constructors (one argument per line, layer by layer) are exempt, as the issue allows
CONSTRUCTORS = {'jetvit_mm/models/jetvit.py::JetViT.__init__', 'jetvit_mm/models/supernet.py::JetViTSupernet.__init__'}


def code_lines(source: str) -> Set[int]:
    """Line numbers that hold a token other than a comment, a newline or a string statement (docstring)."""
    lines: Set[int] = set()
    docstrings: Set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, 'body', None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines - docstrings


def long_functions(path: Path) -> Iterator[Tuple[str, int]]:
    source = path.read_text()
    code = code_lines(source)
    rel = path.relative_to(REPO).as_posix()

    def visit(node: ast.AST, prefix: str) -> Iterator[Tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f'{rel}::{prefix}{child.name}'
                first = child.body[0].lineno
                n = len([i for i in code if first <= i <= child.end_lineno])
                if n > LIMIT and name not in CONSTRUCTORS:
                    yield name, n
                yield from visit(child, f'{prefix}{child.name}.')
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f'{prefix}{child.name}.')

    yield from visit(ast.parse(source), '')


def test_counting_skips_docstrings_comments_and_blank_lines():
    source = 'def f():\n    """doc\n    more"""\n    # note\n\n    x = (1,\n         2)\n    return x\n'
    assert sorted(code_lines(source)) == [1, 6, 7, 8]


def test_no_function_is_over_60_logic_lines():
    found = [f'{name}: {n}' for root in ROOTS for path in sorted((REPO / root).rglob('*.py'))
             for name, n in long_functions(path)]
    assert not found, 'split into named steps: ' + ', '.join(found)
