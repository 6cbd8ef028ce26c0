"""The arch as one piece of data: the model, the mixer of each layer and the letter -> mixer type table with the
mixers' parameter-free options.

W and F layers have the same parameters, and the W window and the L options have none, so weights alone cannot say
what a model computes. An :class:`ArchSpec` does: every JetViT saves it in its state dict (key :data:`SPEC_KEY`, a
uint8 tensor of JSON via ``get_extra_state``), so it survives ``weights_only`` loads, safetensors, prefixes and key
renaming; every load compares it with the model's own (:func:`check_spec`).
"""
import json
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import torch

from .mixers import DEFAULT_MIXERS, MixerTable, option_name

__all__ = ['SPEC_KEY', 'ArchSpec', 'check_spec', 'mixer_table_of', 'spec_from_state']

SPEC_KEY = '_extra_state'  # torch's name for a module's extra state in its state dict
_FORMAT = 'jetvit_arch_spec'
_VERSION = 2  # a type and options per letter ('mixers')


def _frozen(options: Optional[Mapping[str, Mapping[str, Any]]]) -> Optional[Mapping[str, Mapping[str, Any]]]:
    if options is None:
        return None
    plain = json.loads(json.dumps({str(k): dict(v) for k, v in options.items()}))  # the values JSON gives back
    return MappingProxyType({k: MappingProxyType(v) for k, v in sorted(plain.items())})


def mixer_table_of(build_args: Optional[Mapping[str, Any]]) -> MixerTable:
    """The mixer table a model built with ``build_args`` (its ``mixers``) declares."""
    return MixerTable.from_args((build_args or {}).get('mixers'))


def _spec_bytes(tensor: torch.Tensor, source: str) -> torch.Tensor:
    """``tensor`` (a spec tensor cast to another real dtype) back as uint8, when it still holds the bytes 0-255
    exactly; else ValueError naming the key and the dtype it needs."""
    values = None
    if not (tensor.is_complex() or tensor.dtype == torch.bool):
        values = tensor.detach().cpu().to(torch.float64)
    if values is None or not (torch.isfinite(values).all() and torch.equal(values, values.round())
                              and (values.numel() == 0 or (values.min() >= 0 and values.max() <= 255))):
        raise ValueError(f'{source}: {SPEC_KEY} is not a JetViT arch spec: expected a 1-D uint8 tensor of JSON (or '
                         f'one cast to a float / integer dtype that keeps its bytes 0-255 exact), got dtype '
                         f'{tensor.dtype} whose values are not such bytes')
    return values.to(torch.uint8)


@dataclass(frozen=True)
class ArchSpec:
    """What a JetViT (or a supernet) computes beyond its weights: ``arch`` (None for a supernet) or ``search_space``,
    and ``mixers``, per used letter ``{'type': <registered type>, **options}`` without deployment switches and
    initialisations; ``model_name`` and ``mixers`` are None for an old checkpoint that named only its arch."""

    model_name: Optional[str]
    arch: Optional[str] = None
    search_space: Optional[Tuple[str, ...]] = None
    mixers: Optional[Mapping[str, Mapping[str, Any]]] = None

    def __post_init__(self) -> None:
        if (self.arch is None) == (self.search_space is None):
            raise ValueError('an ArchSpec has either an arch (a JetViT) or a search space (a supernet)')
        if self.search_space is not None:
            object.__setattr__(self, 'search_space', tuple(self.search_space))
        object.__setattr__(self, 'mixers', _frozen(self.mixers))

    @classmethod
    def build(cls, model_name: Optional[str], build_args: Optional[Mapping[str, Any]], arch: Optional[str] = None,
              search_space: Optional[Sequence[str]] = None) -> 'ArchSpec':
        """The spec of a model built with ``build_args`` (its mixer table, ``mixers``) and ``arch`` (or
        ``search_space``): the type and options of every letter it uses, defaults filled in."""
        letters = arch if arch is not None else ''.join(search_space or ())
        return cls(model_name, arch, tuple(search_space) if search_space is not None else None,
                   mixer_table_of(build_args).spec_entries(letters))

    # ---------------------------------------------------------------------------------------------- properties
    @property
    def is_supernet(self) -> bool:
        return self.search_space is not None

    @property
    def is_teacher(self) -> bool:
        """All full attention: the teacher's weights, which load into any arch."""
        return self.arch is not None and set(self.arch) == {'F'}

    @property
    def letters(self) -> str:
        return ''.join(sorted(set(self.arch if self.arch is not None else ''.join(self.search_space))))

    def describe(self) -> str:
        return f'arch {self.arch!r}' if self.arch is not None else f'candidates {list(self.search_space)}'

    # ---------------------------------------------------------------------------------------------- serialised
    def types(self) -> Dict[str, str]:
        """The letter -> mixer type table (``{}`` when unknown)."""
        return {letter: entry['type'] for letter, entry in (self.mixers or {}).items()}

    def to_dict(self) -> Dict[str, Any]:
        return dict(format=_FORMAT, version=_VERSION, model_name=self.model_name, arch=self.arch,
                    search_space=list(self.search_space) if self.search_space is not None else None,
                    mixers=None if self.mixers is None else {k: dict(v) for k, v in self.mixers.items()})

    @classmethod
    def from_dict(cls, data: Any, source: str = 'checkpoint') -> 'ArchSpec':
        if not isinstance(data, dict) or data.get('format') != _FORMAT:
            raise ValueError(f'{source}: not a JetViT arch spec: {str(data)[:200]!r}')
        if data.get('version') != _VERSION:
            raise ValueError(f'{source}: arch spec version {data.get("version")!r}; this jetvit_mm reads '
                             f'version {_VERSION}')
        return cls(data.get('model_name'), data.get('arch'), data.get('search_space'), data.get('mixers'))

    def to_tensor(self) -> torch.Tensor:
        """The spec as a uint8 tensor of JSON (what the state dict holds)."""
        return torch.tensor(list(json.dumps(self.to_dict(), sort_keys=True).encode()), dtype=torch.uint8,
                            device='cpu')  # also under a meta default device (real-size builds)

    @classmethod
    def from_tensor(cls, tensor: Any, source: str = 'checkpoint') -> 'ArchSpec':
        """The spec a state dict's ``_extra_state`` holds. A state dict cast whole to another dtype (``.half()``,
        bf16, ...) still reads: fp16, bf16 and every wider dtype hold its bytes 0-255 exactly; they are read back as
        uint8."""
        if not torch.is_tensor(tensor) or tensor.dim() != 1:
            got = f'a {tensor.dim()}-D tensor' if torch.is_tensor(tensor) else type(tensor).__name__
            raise ValueError(f'{source}: {SPEC_KEY} is not a JetViT arch spec (expected a 1-D uint8 tensor of JSON, '
                             f'got {got})')
        cast = ''
        if tensor.dtype != torch.uint8:
            cast = f'; expected a 1-D uint8 tensor of JSON, got dtype {tensor.dtype}, which may not hold its bytes'
            tensor = _spec_bytes(tensor, source)
        try:
            data = json.loads(bytes(tensor.tolist()).decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f'{source}: {SPEC_KEY} does not hold readable JSON ({error}{cast})') from None
        return cls.from_dict(data, source)

    # ---------------------------------------------------------------------------------------------- comparison
    def type_differences(self, other: 'ArchSpec') -> Dict[str, Tuple[Optional[str], Optional[str]]]:
        """``{letter: (this type, other type)}`` for this spec's letters whose mixer type differs (none when either
        side does not know its table)."""
        if self.mixers is None or other.mixers is None:
            return {}
        mine, theirs = self.types(), other.types()
        return {letter: (mine.get(letter), theirs.get(letter)) for letter in self.letters
                if letter in theirs and mine.get(letter) != theirs[letter]}

    def option_differences(self, other: 'ArchSpec') -> Dict[str, Tuple[Any, Any]]:
        """``{option: (this value, other value)}`` for the options of this spec's letters that differ, named as a
        user sets them (``mixers.W.window_size``; a letter of another type differs in ``mixers.<letter>.type``)."""
        if self.mixers is None or other.mixers is None:
            return {}
        out = {}
        for letter in self.letters:
            mine, theirs = dict(self.mixers.get(letter, {})), dict(other.mixers.get(letter, {}))
            type_name = mine.get('type', '')
            for key in sorted(set(mine) | set(theirs), key=lambda k: (k != 'type', k)):
                if mine.get(key) != theirs.get(key):
                    out[option_name(letter, type_name, key)] = (mine.get(key), theirs.get(key))
        return out


def refusal(saved: ArchSpec, model: ArchSpec, what: str = 'JetViT') -> Optional[str]:
    """Why weights saved with ``saved`` must not load into a model with spec ``model``, or None if they may.

    The model name is recorded, not compared: another family or size shows in the keys and shapes, and a variant
    shrunk to the same shapes (tests, toy runs) computes the same thing."""
    if saved.is_supernet and not model.is_supernet:
        return (f'is a supernet checkpoint (a JetViTSupernet with {saved.describe()}), not one arch: export an arch '
                f'first (tools/export_hybrid.py CONFIG CHECKPOINT --arch ARCH --out-dir DIR)')
    if saved.is_teacher:
        return None
    if model.is_supernet and not saved.is_supernet:
        return (f'holds a {what} with arch {saved.arch!r}, but this model is a supernet: only a teacher (all F) or '
                f'a supernet checkpoint loads into it')
    if saved.is_supernet and [set(s) for s in saved.search_space] != [set(s) for s in model.search_space]:
        return (f'holds a supernet with {saved.describe()}, but this model has {model.describe()}: build it with '
                f'search_space={list(saved.search_space)}')
    if not saved.is_supernet and saved.arch != model.arch:
        foreign = {letter: t for letter, t in saved.types().items() if letter not in model.types()
                   and DEFAULT_MIXERS.get(letter, {}).get('type') != t}  # a letter the model may not declare
        declare = ''.join(f' (its {letter!r} is {t}: mixers.{letter}=dict(type={t!r}, ...))'
                          for letter, t in foreign.items())
        return (f'holds a {what} with arch {saved.arch!r}, but this model has arch {model.arch!r}: build it with '
                f'arch={saved.arch!r}{declare}')
    types = saved.type_differences(model)
    if types:
        return (f'holds a {what} whose ' + ', '.join(f'{letter!r} is {a}' for letter, (a, _) in types.items())
                + ', but this model\'s ' + ', '.join(f'{letter!r} is {b}' for letter, (_, b) in types.items())
                + ': declare ' + ', '.join(f'mixers.{letter}=dict(type={a!r}, ...)'
                                           for letter, (a, _) in types.items()))
    differ = saved.option_differences(model)
    if differ:
        return (f'holds a {what} built with ' + ', '.join(f'{k}={a!r}' for k, (a, _) in differ.items())
                + ', but this model has ' + ', '.join(f'{k}={b!r}' for k, (_, b) in differ.items())
                + f': build it with the same {", ".join(differ)}')
    return None


def check_spec(saved: Optional[ArchSpec], model: ArchSpec, source: str, what: str = 'JetViT') -> None:
    """Raise ValueError naming ``source`` when weights saved with ``saved`` do not fit a model with spec ``model``
    (another arch, window or L option, or a supernet into one arch). No saved spec: nothing to check."""
    reason = None if saved is None else refusal(saved, model, what)
    if reason is not None:
        raise ValueError(f'{source} {reason}')


def spec_from_state(state: Mapping[str, Any], prefix: str = '', source: str = 'checkpoint') -> Optional[ArchSpec]:
    """The spec a state dict holds for the JetViT under ``prefix`` (``''``, ``'backbone.'``, ...), or None."""
    tensor = state.get(prefix + SPEC_KEY)
    return None if tensor is None else ArchSpec.from_tensor(tensor, source)
