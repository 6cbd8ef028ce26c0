"""Config text saved inside checkpoints, read without running it.

mmengine's runner writes the run's config as Python text into every checkpoint (``meta['cfg']`` and the message
hub's ``runtime_info['cfg']``); ``Runner.resume`` (``meta['config']``) and ``BaseInferencer`` (the config of a
checkpoint given without one) hand that text to ``Config.fromstring``, which *executes* it. A checkpoint is
untrusted input, so every checkpoint :func:`~jetvit_mm.models.checkpoint.read` reads has those fields replaced by
:func:`literal_config_text`: the same top-level literal assignments, and nothing that could run.
"""
import ast
import math
import sys
import warnings
from typing import Any, Dict, Optional

# the fields of a loaded checkpoint that mmengine passes to Config.fromstring: (outer key, inner keys...)
CONFIG_TEXT_FIELDS = (('meta', 'cfg'), ('meta', 'config'), ('message_hub', 'runtime_info', 'cfg'))


class _NotLiteral(Exception):
    """An expression that is not a plain literal."""


def _literal(node: ast.AST) -> Any:
    """The value of a config expression built from literals, ``dict(...)``, ``{...}``, ``[...]``, ``(...)`` and a
    unary minus; anything else (names, other calls, operators, attribute access) raises :class:`_NotLiteral`."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):  # ``{**other}``
            raise _NotLiteral
        return {_hashable(_literal(k)): _literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [_literal(v) for v in node.elts]
        return values if isinstance(node, ast.List) else tuple(values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == 'dict' and not node.args:
        if any(kw.arg is None for kw in node.keywords):  # ``dict(**other)``
            raise _NotLiteral
        return {kw.arg: _literal(kw.value) for kw in node.keywords}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand)
        if isinstance(value, (int, float, complex)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    raise _NotLiteral


def _hashable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool, type(None), tuple)):
        return value
    raise _NotLiteral


def literal_assignments(text: str) -> Dict[str, Any]:
    """``{name: value}`` of the top-level ``name = <literal>`` assignments of config text, never executed; the last
    assignment of a name wins, as when the text runs. Other statements and non-literal values are left out (a
    warning names them); unparsable text gives ``{}`` with a warning."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as error:
        warnings.warn(f'the config text saved in the checkpoint does not parse ({error}); it is ignored',
                      stacklevel=3)
        return {}
    values: Dict[str, Any] = {}
    skipped = []
    for node in tree.body:
        names = [t.id for t in getattr(node, 'targets', []) if isinstance(t, ast.Name)]
        if not isinstance(node, ast.Assign) or len(names) != len(node.targets):
            skipped.append(f'line {node.lineno}')
            continue
        try:
            value = _literal(node.value)
        except _NotLiteral:
            skipped.append(f'{", ".join(names)} (line {node.lineno})')
            continue
        for name in names:
            values[name] = value
    if skipped:
        warnings.warn('the config text saved in the checkpoint has statements that are not literal assignments; '
                      f'they are ignored, never run: {", ".join(skipped[:8])}', stacklevel=3)
    return values


def _python(value: Any) -> str:
    """Python source that evaluates to ``value`` (a literal) and does nothing else."""
    if isinstance(value, dict):
        return '{' + ', '.join(f'{_python(k)}: {_python(v)}' for k, v in value.items()) + '}'
    if isinstance(value, list):
        return '[' + ', '.join(_python(v) for v in value) + ']'
    if isinstance(value, tuple):
        return '(' + ''.join(f'{_python(v)}, ' for v in value) + ')'
    if isinstance(value, float) and not math.isfinite(value):
        return f'float({str(value)!r})'
    if isinstance(value, (str, bytes, int, float, complex, bool, type(None))):
        return repr(value)
    raise TypeError(f'not a config literal: {type(value).__name__}')


def literal_config_text(text: str) -> str:
    """Config text with only its top-level literal assignments, rewritten as plain Python literals.

    Running the result assigns the same values as the original's literal assignments and does nothing else:
    ``_base_`` (mmengine would read and run those files) is dropped, and ``custom_imports`` keeps only modules
    this process has already imported (importing them again runs nothing).
    """
    values = literal_assignments(text)
    values.pop('_base_', None)
    imports = values.get('custom_imports')
    if isinstance(imports, dict):
        names = imports.get('imports')
        names = [names] if isinstance(names, str) else names
        kept = [n for n in names or [] if isinstance(n, str) and n in sys.modules]
        values['custom_imports'] = dict(imports, imports=kept)
    elif 'custom_imports' in values:
        del values['custom_imports']
    return literal_text(values)


def literal_text(values: Dict[str, Any]) -> str:
    """Config text assigning ``values`` (``{name: literal}``) and nothing else: what :func:`literal_assignments`
    reads back; TypeError when a value is not a config literal (a class, a function)."""
    return ''.join(f'{name} = {_python(value)}\n' for name, value in values.items())


def neutralise_config_text(checkpoint: Any) -> Any:
    """``checkpoint`` (a loaded dict) with every config text mmengine would execute made literal-only, in place."""
    for path in CONFIG_TEXT_FIELDS:
        parent: Optional[Any] = checkpoint
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and path[-1] in parent:
            text = parent[path[-1]]
            parent[path[-1]] = literal_config_text(text) if isinstance(text, str) else ''
    return checkpoint
