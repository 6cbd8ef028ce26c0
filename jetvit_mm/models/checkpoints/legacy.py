"""The one-time conversion of files written before the arch spec lived only in the state dict (``python
tools/upgrade_checkpoint.py OLD NEW``), and the check that refuses such files elsewhere, naming it.

Old formats: a version-1 spec in the state dict (options only, the default letters L, W, F); an export that named its
arch in ``meta['jetvit_arch']`` (and ``meta['build_args']``) and held no spec; model arguments that set mixer options
(``window_size``, ``linear_cfg``, ``window_kernel``; now ``mixers=``). Everything else reads the spec from the state
dict alone (:func:`jetvit_mm.models.arch.spec_from_state`).
"""
import copy
import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch

from ..arch import SPEC_KEY, UPGRADE_HINT, ArchSpec, _spec_bytes
from ..mixers.table import DEFAULT_MIXERS, REMOVED_ARGUMENTS

__all__ = ['legacy_build_args', 'refuse_legacy_meta', 'upgrade_spec_dict', 'upgrade_state']

LEGACY_META_KEY = 'jetvit_arch'  # an export's arch before specs were saved with the weights


def legacy_build_args(args: Mapping[str, Any]) -> Dict[str, Any]:
    """``args`` with the removed mixer-option arguments folded into a ``mixers`` table (the default one if it names
    none)."""
    out = {k: copy.deepcopy(v) for k, v in args.items() if k not in REMOVED_ARGUMENTS}
    removed = {k: args[k] for k in REMOVED_ARGUMENTS if args.get(k) is not None}
    if not removed:
        return out
    table = {k: dict(v) for k, v in (args.get('mixers') or DEFAULT_MIXERS).items()}
    for argument, value in removed.items():
        letter, option = REMOVED_ARGUMENTS[argument]
        table.setdefault(letter, dict(DEFAULT_MIXERS[letter]))
        table[letter].update(dict(value) if option is None else {option: value})
    out['mixers'] = table
    return out


def upgrade_spec_dict(data: Mapping[str, Any]) -> Dict[str, Any]:
    """A version-1 spec dict (``options``: ``window_size``, ``linear_cfg.<key>`` of the default L, W, F) as the
    current version's; a current one unchanged."""
    if data.get('version') != 1:
        return dict(data)
    mixers = None
    if data.get('options') is not None:
        mixers = {}
        for letter, values in data['options'].items():
            entry = dict(type=DEFAULT_MIXERS[letter]['type'])
            entry.update({k.split('.', 1)[1] if k.startswith('linear_cfg.') else k: v for k, v in values.items()})
            mixers[letter] = entry
    return ArchSpec(data.get('model_name'), data.get('arch'), data.get('search_space'), mixers).to_dict()


def _read_v1_or_current(tensor: torch.Tensor, source: str) -> ArchSpec:
    raw = tensor if tensor.dtype == torch.uint8 else _spec_bytes(tensor, source)
    return ArchSpec.from_dict(upgrade_spec_dict(json.loads(bytes(raw.tolist()).decode())), source)


def upgrade_state(state: Dict[str, Any], meta: Mapping[str, Any], source: str = 'checkpoint',
                  extra_specs: Optional[Mapping[str, ArchSpec]] = None) -> Tuple[Dict[str, Any], List[str]]:
    """``state`` with every spec in the current version in its state dict: version-1 specs rewritten, the spec of an
    export's ``meta['jetvit_arch']`` (and ``meta['build_args']``) added as ``_extra_state``, and ``extra_specs``
    (``{prefix: spec}``, e.g. from a runner checkpoint's saved config) added where the state holds none. Returns the
    new state and what changed (empty: nothing to do)."""
    state, changes = dict(state), []
    for key in [k for k in state if k == SPEC_KEY or k.endswith('.' + SPEC_KEY)]:
        spec = _read_v1_or_current(state[key], f'{source} ({key})')
        new = spec.to_tensor()
        if not torch.equal(new, state[key]):
            state[key] = new
            changes.append(f'{key}: arch spec rewritten in version 2')
    arch = meta.get(LEGACY_META_KEY)
    if isinstance(arch, str) and SPEC_KEY not in state:
        if isinstance(meta.get('build_args'), Mapping):
            args = legacy_build_args(meta['build_args'])
            spec = ArchSpec.build(args.get('model_name'), args, arch=arch)
        else:  # the arch alone: its mixer options unknown (not compared on load)
            spec = ArchSpec(None, arch)
        state[SPEC_KEY] = spec.to_tensor()
        changes.append(f'{SPEC_KEY}: arch spec of meta[{LEGACY_META_KEY!r}]={arch!r} written into the state dict')
    for prefix, spec in (extra_specs or {}).items():
        if prefix + SPEC_KEY not in state:
            state[prefix + SPEC_KEY] = spec.to_tensor()
            changes.append(f'{prefix}{SPEC_KEY}: arch spec ({spec.describe()}) written into the state dict')
    return state, changes


def refuse_legacy_meta(state: Mapping[str, Any], meta: Mapping[str, Any], source: str) -> None:
    """ValueError naming the converter for an export whose arch is only in ``meta['jetvit_arch']`` (no spec in its
    state dict): loading it unchecked could put its weights into another arch."""
    arch = meta.get(LEGACY_META_KEY)
    if isinstance(arch, str) and SPEC_KEY not in state and set(arch) != {'F'}:
        raise ValueError(f'{source}: an export of the old format, its arch {arch!r} only in meta[{LEGACY_META_KEY!r}] '
                         f'and no arch spec in its state dict; {UPGRADE_HINT}')
