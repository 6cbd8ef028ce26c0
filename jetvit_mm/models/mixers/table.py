"""The letters a model declares: letter -> registered mixer type and its options (``mixers=``, the one way to set a
mixer option), with today's three as the default."""
import copy
import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

import torch
from torch import nn

from .contract import MixerContractError, check_class, own_parameters, probe_failure, probe_mixer
from .full import FullAttention
from .registry import MIXER_REGISTRY

__all__ = ['DEFAULT_MIXERS', 'MixerEntry', 'MixerTable', 'default_mixers', 'option_name']

DEFAULT_MIXERS: Dict[str, Dict[str, Any]] = {
    'L': dict(type='LinearAttention', conv='squeeze'),
    'W': dict(type='WindowAttention', window_size=16),
    'F': dict(type='FullAttention'),
}
FULL = 'F'  # the teacher's attention: the all-F arch is the teacher


def option_name(letter: str, type_name: str, key: str) -> str:
    """How an option is named to a user: by its place in the mixer table (``mixers.W.window_size``), a config key.
    ``type_name`` is accepted for callers that know it; the name does not depend on it."""
    return f'mixers.{letter}.{key}'


def default_mixers(**options: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """A copy of :data:`DEFAULT_MIXERS` with the options of the given letters updated, e.g.
    ``default_mixers(W=dict(window_size=8), L=dict(conv='static'))``: the full table ``mixers=`` takes."""
    table = copy.deepcopy(DEFAULT_MIXERS)
    for letter, values in options.items():
        if letter not in table:
            raise ValueError(f'default_mixers: {letter!r} is not a default letter; valid: {sorted(table)} (declare '
                             f'another letter in the mixers dict itself)')
        table[letter].update(copy.deepcopy(dict(values)))
    return table


def _json_value(letter: str, key: str, value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        raise ValueError(f'mixers[{letter!r}]: option {key}={value!r} is not a JSON value; the arch spec saved with '
                         f'the weights records every option') from None


@dataclass(frozen=True)
class MixerEntry:
    """One declared letter: its registered type, the class, and the options it is built with."""

    letter: str
    type: str
    cls: type
    options: Mapping[str, Any]

    def build(self, **common: Any) -> nn.Module:
        return self.cls(**common, **self.options)

    @property
    def inherits(self) -> str:
        return self.cls.inherits

    def spec_options(self) -> Dict[str, Any]:
        """What this letter computes beyond its weights: every option, defaults filled in, except the class's
        ``deployment_options`` and ``init_options``."""
        exempt = set(getattr(self.cls, 'deployment_options', ())) | set(getattr(self.cls, 'init_options', ()))
        values = {k: p.default for k, p in own_parameters(self.cls).items() if p.default is not inspect.Parameter.empty}
        values.update(self.options)
        return {k: _json_value(self.letter, k, v) for k, v in sorted(values.items()) if k not in exempt}

    def config(self) -> Dict[str, Any]:
        """The entry as ``mixers=`` takes it."""
        return dict(type=self.type, **copy.deepcopy(dict(self.options)))


class MixerTable:
    """Letter -> :class:`MixerEntry`, in declaration order; F (full attention) is always one of them."""

    def __init__(self, entries: Mapping[str, MixerEntry]) -> None:
        self.entries = dict(entries)

    # ------------------------------------------------------------------ building from arguments
    @classmethod
    def from_args(cls, mixers: Optional[Mapping[str, Mapping[str, Any]]] = None) -> 'MixerTable':
        """The table of ``mixers`` (default: :data:`DEFAULT_MIXERS`). Every entry's type must be registered and its
        class keep the mixer contract's signatures."""
        declared = _declared(mixers)
        entries = {letter: _entry(letter, spec) for letter, spec in declared.items()}
        if FULL not in entries:
            raise ValueError(f'the mixers declare {sorted(entries)} but no {FULL!r}: F is the teacher\'s full '
                             f'attention (the all-F arch is the teacher), declare F=dict(type=\'FullAttention\')')
        if not issubclass(entries[FULL].cls, FullAttention):
            raise ValueError(f'mixer {FULL!r} is the teacher\'s full attention (the all-F arch is the teacher): '
                             f'declare it as FullAttention (or a subclass), got {entries[FULL].type}')
        _refuse_duplicates(entries)
        return cls(entries)

    # ------------------------------------------------------------------ queries
    @property
    def letters(self) -> str:
        """Every declared letter, in declaration order."""
        return ''.join(self.entries)

    @property
    def efficient_letters(self) -> str:
        """Every declared letter except F, in declaration order: the Step-1 search space."""
        return ''.join(letter for letter in self.entries if letter != FULL)

    def __getitem__(self, letter: str) -> MixerEntry:
        if letter not in self.entries:
            raise ValueError(f'mixer letter {letter!r} is not declared; declared letters: {self.describe_letters()}')
        return self.entries[letter]

    def __contains__(self, letter: str) -> bool:
        return letter in self.entries

    def describe_letters(self) -> str:
        return ', '.join(f'{letter!r} ({entry.type})' for letter, entry in self.entries.items())

    def spec_entries(self, letters: Iterable[str]) -> Dict[str, Dict[str, Any]]:
        """``{letter: {'type': ..., **spec options}}`` for ``letters`` (what the arch spec records)."""
        return {letter: dict(type=self[letter].type, **self[letter].spec_options()) for letter in sorted(set(letters))}

    def option_names(self, letter: str) -> Dict[str, str]:
        entry = self.entries[letter]
        return {k: option_name(letter, entry.type, k) for k in own_parameters(entry.cls)}

    # ------------------------------------------------------------------ building mixers
    def build(self, letter: str, **common: Any) -> nn.Module:
        return self[letter].build(**common)

    def check(self, common: Mapping[str, Any], rope_dim: Optional[int] = None) -> None:
        """The mixer contract of every declared letter, used or not (so a bad option never hides behind an arch
        without that letter): each is built once on the meta device (no memory, no RNG draws) and called on a tiny
        input. A mixer the meta device cannot run is built and called on the CPU instead."""
        for entry in self.entries.values():
            check_entry(entry, common, rope_dim)


def check_entry(entry: MixerEntry, common: Mapping[str, Any], rope_dim: Optional[int]) -> None:
    """Build ``entry`` with ``common`` and probe it (see :meth:`MixerTable.check`). The class's own checks of its
    options raise as they are; a failing probe call is a broken contract."""
    args = (entry.letter, entry.type)
    probe = dict(dim=common['dim'], num_prefix_tokens=common.get('num_prefix_tokens', 1),
                 qkv_bias=common.get('qkv_bias', True), proj_bias=common.get('proj_bias', True), rope_dim=rope_dim)
    # a model draws the same random numbers whatever its table; the probe mixers are built outside the caller's
    # inference mode (a model built under torch.inference_mode() is probed with gradients like any other)
    with torch.random.fork_rng(devices=[]), torch.inference_mode(False):
        try:
            with torch.device('meta'):
                mixer = entry.build(**common)
        except (RuntimeError, NotImplementedError):  # something the meta device cannot build: build it for real
            mixer = None
        if mixer is not None:
            try:
                probe_mixer(*args, mixer, **probe)
                return
            except MixerContractError:
                raise
            except Exception:  # noqa: BLE001 (perhaps only the meta device fails: try for real)
                pass
        with torch.device('cpu'):  # for real, whatever default device the caller builds the model under
            mixer = entry.build(**common)
        try:
            probe_mixer(*args, mixer, **probe)
        except MixerContractError:
            raise
        except Exception as error:  # noqa: BLE001 (any failure of the probe call is the mixer's)
            raise probe_failure(*args, error, (1, probe['num_prefix_tokens'] + 6, probe['dim'])) from error


def _declared(mixers: Optional[Mapping[str, Any]]) -> Dict[str, Dict[str, Any]]:
    if mixers is None:
        return copy.deepcopy(DEFAULT_MIXERS)
    if not isinstance(mixers, Mapping) or not mixers:
        raise ValueError(f'mixers must be a non-empty dict letter -> dict(type=..., **options), got {mixers!r}')
    out = {}
    for letter, spec in mixers.items():
        if not isinstance(letter, str) or not re.fullmatch('[A-Z]', letter):
            raise ValueError(f'mixer letters are single capital letters A-Z, got {letter!r} in mixers '
                             f'{sorted(map(str, mixers))}')
        if not isinstance(spec, Mapping) or not isinstance(spec.get('type'), str):
            raise ValueError(f'mixers[{letter!r}] must be a dict with a registered type name, e.g. '
                             f'dict(type=\'LinearAttention\', conv=\'squeeze\'), got {spec!r}')
        out[letter] = copy.deepcopy(dict(spec))
    return out


def _entry(letter: str, spec: Mapping[str, Any]) -> MixerEntry:
    type_name = spec['type']
    cls = MIXER_REGISTRY.get(type_name)
    if cls is None:
        raise ValueError(f'mixer {letter!r}: unregistered mixer type {type_name!r}; registered types: '
                         f'{MIXER_REGISTRY.names()} (a type from another package is registered when that package is '
                         f'imported: a config\'s custom_imports)')
    options = {k: v for k, v in spec.items() if k != 'type'}
    names = {k: option_name(letter, type_name, k) for k in list(options) + list(own_parameters(cls))}
    check_class(letter, type_name, cls, options, names)
    entry = MixerEntry(letter, type_name, cls, options)
    entry.spec_options()  # options must be JSON values
    return entry


def _refuse_duplicates(entries: Mapping[str, MixerEntry]) -> None:
    seen: Dict[Tuple[str, str], str] = {}
    for letter, entry in entries.items():
        key = (entry.type, json.dumps(entry.spec_options(), sort_keys=True))
        if key in seen:
            raise ValueError(f'mixer {entry.type}({key[1]}) declared twice, as {seen[key]!r} and {letter!r}: they '
                             f'compute the same, so a search could not tell them apart; keep one letter')
        seen[key] = letter
