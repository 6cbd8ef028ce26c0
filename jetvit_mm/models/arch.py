"""The arch as one piece of data: the model, the mixer of each layer and the mixers' parameter-free options.

W and F layers have the same parameters, and the W window and the L options have none of their own, so weights
alone cannot say what a model computes. An :class:`ArchSpec` does: every JetViT saves its spec in its state dict
(key :data:`SPEC_KEY`, a uint8 tensor of JSON, through torch's ``get_extra_state``), so it survives
``weights_only`` loads, safetensors, prefixes and key renaming, and every load compares it with the model's own
(:func:`check_spec`). The options are :func:`~jetvit_mm.models.mixers.mixing_args`: the one place that lists the
options that change what a layer computes and excludes deployment switches (``precision``, ``kernel_init``, ...).
"""
import json
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import torch

from .mixers import mixing_args

__all__ = ['SPEC_KEY', 'SPEC_META_KEY', 'ArchSpec', 'check_spec', 'spec_from_meta', 'spec_from_state']

SPEC_KEY = '_extra_state'  # torch's name for a module's extra state in its state dict
SPEC_META_KEY = 'jetvit_specs'  # checkpoint meta: {module name ('' for a bare JetViT): spec dict}
_FORMAT = 'jetvit_arch_spec'
_VERSION = 1


def _frozen(options: Optional[Mapping[str, Mapping[str, Any]]]) -> Optional[Mapping[str, Mapping[str, Any]]]:
    if options is None:
        return None
    plain = json.loads(json.dumps({str(k): dict(v) for k, v in options.items()}))  # the values JSON gives back
    return MappingProxyType({k: MappingProxyType(v) for k, v in sorted(plain.items())})


@dataclass(frozen=True)
class ArchSpec:
    """What a JetViT (or a supernet) computes beyond its weights.

    Args:
        model_name: the teacher variant (``dinov3_vitb16``, ...); None when unknown (an old checkpoint).
        arch: one mixer letter per layer; None for a supernet.
        search_space: a supernet's candidate letters per layer; None for a plain JetViT.
        options: per letter, its parameter-free options (``window_size``, ``linear_cfg.<key>``); None when unknown
            (an old checkpoint that named only its arch).
    """

    model_name: Optional[str]
    arch: Optional[str] = None
    search_space: Optional[Tuple[str, ...]] = None
    options: Optional[Mapping[str, Mapping[str, Any]]] = None

    def __post_init__(self) -> None:
        if (self.arch is None) == (self.search_space is None):
            raise ValueError('an ArchSpec has either an arch (a JetViT) or a search space (a supernet)')
        if self.search_space is not None:
            object.__setattr__(self, 'search_space', tuple(self.search_space))
        object.__setattr__(self, 'options', _frozen(self.options))

    @classmethod
    def build(cls, model_name: Optional[str], build_args: Optional[Dict[str, Any]], arch: Optional[str] = None,
              search_space: Optional[Sequence[str]] = None) -> 'ArchSpec':
        """The spec of a model built with ``build_args`` (its ``window_size`` and ``linear_cfg``) and ``arch`` (or
        ``search_space``): the options of every letter it uses, defaults filled in."""
        letters = arch if arch is not None else ''.join(search_space or ())
        options = {letter: mixing_args(build_args, letter) for letter in sorted(set(letters))}
        return cls(model_name, arch, tuple(search_space) if search_space is not None else None, options)

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
    def to_dict(self) -> Dict[str, Any]:
        return dict(format=_FORMAT, version=_VERSION, model_name=self.model_name, arch=self.arch,
                    search_space=list(self.search_space) if self.search_space is not None else None,
                    options=None if self.options is None else {k: dict(v) for k, v in self.options.items()})

    @classmethod
    def from_dict(cls, data: Any, source: str = 'checkpoint') -> 'ArchSpec':
        if not isinstance(data, dict) or data.get('format') != _FORMAT:
            raise ValueError(f'{source}: not a JetViT arch spec: {str(data)[:200]!r}')
        if data.get('version') != _VERSION:
            raise ValueError(f'{source}: arch spec version {data.get("version")!r}; this jetvit_mm reads '
                             f'version {_VERSION}')
        return cls(data.get('model_name'), data.get('arch'), data.get('search_space'), data.get('options'))

    def to_tensor(self) -> torch.Tensor:
        """The spec as a uint8 tensor of JSON (what the state dict holds)."""
        return torch.tensor(list(json.dumps(self.to_dict(), sort_keys=True).encode()), dtype=torch.uint8,
                            device='cpu')  # also under a meta default device (real-size builds)

    @classmethod
    def from_tensor(cls, tensor: Any, source: str = 'checkpoint') -> 'ArchSpec':
        if not torch.is_tensor(tensor) or tensor.dtype != torch.uint8 or tensor.dim() != 1:
            raise ValueError(f'{source}: {SPEC_KEY} is not a JetViT arch spec (expected a 1-D uint8 tensor of JSON, '
                             f'got {type(tensor).__name__})')
        try:
            data = json.loads(bytes(tensor.tolist()).decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f'{source}: {SPEC_KEY} does not hold readable JSON ({error})') from None
        return cls.from_dict(data, source)

    # ---------------------------------------------------------------------------------------------- comparison
    def option_differences(self, other: 'ArchSpec') -> Dict[str, Tuple[Any, Any]]:
        """``{option: (this value, other value)}`` for the options of this spec's letters that differ (none when
        either side does not know its options)."""
        if self.options is None or other.options is None:
            return {}
        out = {}
        for letter in self.letters:
            mine, theirs = self.options.get(letter, {}), other.options.get(letter, {})
            out.update({k: (v, theirs.get(k)) for k, v in mine.items() if theirs.get(k) != v})
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
        return (f'holds a {what} with arch {saved.arch!r}, but this model has arch {model.arch!r}: build it with '
                f'arch={saved.arch!r}')
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


def spec_from_meta(meta: Mapping[str, Any], name: str = '', source: str = 'checkpoint') -> Optional[ArchSpec]:
    """The spec a checkpoint's meta names for its JetViT ``name`` (``''`` for a bare JetViT file, ``'backbone'``,
    ``'student'``, ...), or None. Older exports named only ``jetvit_arch`` (and ``build_args``)."""
    specs = meta.get(SPEC_META_KEY)
    if isinstance(specs, dict) and name in specs:
        return ArchSpec.from_dict(specs[name], source)
    arch = meta.get('jetvit_arch')
    if not isinstance(arch, str):
        return None
    args = meta.get('build_args')
    if isinstance(args, dict):
        return ArchSpec.build(args.get('model_name'), args, arch=arch)
    return ArchSpec(None, arch)
