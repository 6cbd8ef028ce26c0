"""Token mixers: registered classes a model declares as letters (default: L linear attention + conv on V, W window
attention, F full attention), each keeping the contract of :mod:`~jetvit_mm.models.mixers.base`. A model's
``mixers=`` table (:class:`MixerTable`) maps its letters to classes and options, once, when the model is built.
"""
from typing import Any, Dict, Iterable, Optional, Type

from torch import nn

from .base import COMMON_ARGS, INHERITS, TokenMixer
from .contract import MixerContractError
from .full import FullAttention
from .linear import LinearAttention
from .registry import MIXER_REGISTRY, MixerRegistry, register_mixer
from .squeeze_conv import CONV_VARIANTS, SqueezeDynamicConv, StaticDepthwiseConv, TokenDynamicConv
from .table import DEFAULT_MIXERS, MixerEntry, MixerTable, default_mixers, option_name
from .window import WindowAttention

for _cls in (FullAttention, WindowAttention, LinearAttention):
    register_mixer(_cls)

# the default table's letters and classes
MIXERS: Dict[str, Type[nn.Module]] = {'F': FullAttention, 'W': WindowAttention, 'L': LinearAttention}


def _valid_letters(letters: Optional[Iterable[str]] = None) -> str:
    return ', '.join(repr(letter) for letter in sorted(MIXERS if letters is None else set(letters)))


def get_mixer_cls(letter: str) -> Type[nn.Module]:
    """The class of one letter of the default table; ValueError naming the letter and the valid ones otherwise."""
    if letter not in MIXERS:
        raise ValueError(f'unknown mixer letter {letter!r}; valid letters: {_valid_letters()}')
    return MIXERS[letter]


def validate_arch(arch: str, depth: Optional[int] = None, letters: Optional[Iterable[str]] = None) -> str:
    """Check an arch string (one letter per layer, each one of ``letters``: a model's declared letters, default
    the default table's) and return it unchanged."""
    valid = set(MIXERS if letters is None else letters)
    if not isinstance(arch, str) or not arch:
        raise ValueError(f'arch must be a non-empty string of mixer letters ({_valid_letters(valid)}), got {arch!r}')
    if depth is not None and len(arch) != depth:
        raise ValueError(f'arch {arch!r} has {len(arch)} letters, expected one per layer: {depth}')
    bad = [(i, letter) for i, letter in enumerate(arch) if letter not in valid]
    if bad:
        where = ', '.join(f'{letter!r} at layer {i}' for i, letter in bad)
        hint = '' if letters is None else ' (the letters this model declares; more are declared with mixers=...)'
        raise ValueError(f'arch {arch!r} has invalid letter(s): {where}; valid letters: {_valid_letters(valid)}'
                         f'{hint}')
    return arch


def build_mixer(letter: str, dim: int, num_heads: int, qkv_bias: bool = True, proj_bias: bool = True,
                num_prefix_tokens: int = 1, rotate_half: bool = True, attn_drop: float = 0., proj_drop: float = 0.,
                mixers: Optional[Dict[str, Dict[str, Any]]] = None) -> nn.Module:
    """Build the mixer for ``letter`` of the table ``mixers`` (e.g. ``default_mixers(W=dict(window_size=8))``).
    Every declared letter is checked, whatever ``letter``, so a typo never hides behind an arch that lacks it."""
    table = MixerTable.from_args(mixers)
    common = dict(dim=dim, num_heads=num_heads, qkv_bias=qkv_bias, proj_bias=proj_bias,
                  num_prefix_tokens=num_prefix_tokens, rotate_half=rotate_half, attn_drop=attn_drop,
                  proj_drop=proj_drop)
    table.check(common)
    return table.build(letter, **common)


__all__ = ['CONV_VARIANTS', 'COMMON_ARGS', 'DEFAULT_MIXERS', 'INHERITS', 'MIXERS', 'MIXER_REGISTRY', 'FullAttention',
           'LinearAttention', 'MixerContractError', 'MixerEntry', 'MixerRegistry', 'MixerTable', 'SqueezeDynamicConv',
           'StaticDepthwiseConv', 'TokenDynamicConv', 'TokenMixer', 'WindowAttention', 'build_mixer',
           'default_mixers', 'get_mixer_cls', 'option_name', 'register_mixer', 'validate_arch']
