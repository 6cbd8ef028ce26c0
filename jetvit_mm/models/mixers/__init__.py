"""Token mixers, one letter each: F (full attention), W (window attention), L (linear attention + conv on V).

Every mixer owns the teacher attention's ``qkv`` and ``proj`` Linears and is called as
``mixer(x, grid_size, rope=None)``. The letter-to-class lookup lives here and nowhere else.
"""
import inspect
from typing import Any, Dict, Optional, Tuple, Type

import torch
from torch import nn

from .full import FullAttention
from .linear import LinearAttention
from .squeeze_conv import CONV_VARIANTS, SqueezeDynamicConv, StaticDepthwiseConv, TokenDynamicConv
from .window import WindowAttention

MIXERS: Dict[str, Type[nn.Module]] = {'F': FullAttention, 'W': WindowAttention, 'L': LinearAttention}
_COMMON_ARGS = ('dim', 'num_heads', 'qkv_bias', 'proj_bias', 'num_prefix_tokens', 'rotate_half', 'attn_drop',
                'proj_drop')
LINEAR_CFG_KEYS = tuple(p for p in inspect.signature(LinearAttention.__init__).parameters
                        if p not in ('self',) + _COMMON_ARGS)


def _valid_letters() -> str:
    return ', '.join(repr(letter) for letter in sorted(MIXERS))


def get_mixer_cls(letter: str) -> Type[nn.Module]:
    """The mixer class for one arch letter; ValueError naming the letter and the valid ones otherwise."""
    if letter not in MIXERS:
        raise ValueError(f'unknown mixer letter {letter!r}; valid letters: {_valid_letters()}')
    return MIXERS[letter]


def validate_arch(arch: str, depth: Optional[int] = None) -> str:
    """Check an arch string (one letter per layer) and return it unchanged."""
    if not isinstance(arch, str) or not arch:
        raise ValueError(f'arch must be a non-empty string of mixer letters ({_valid_letters()}), got {arch!r}')
    if depth is not None and len(arch) != depth:
        raise ValueError(f'arch {arch!r} has {len(arch)} letters, expected one per layer: {depth}')
    bad = [(i, letter) for i, letter in enumerate(arch) if letter not in MIXERS]
    if bad:
        where = ', '.join(f'{letter!r} at layer {i}' for i, letter in bad)
        raise ValueError(f'arch {arch!r} has invalid letter(s): {where}; valid letters: {_valid_letters()}')
    return arch


def build_mixer(
        letter: str,
        dim: int,
        num_heads: int,
        qkv_bias: bool = True,
        proj_bias: bool = True,
        num_prefix_tokens: int = 1,
        rotate_half: bool = True,
        attn_drop: float = 0.,
        proj_drop: float = 0.,
        window_size: int = 16,
        linear_cfg: Optional[Dict[str, Any]] = None,
        window_kernel: str = 'auto',
) -> nn.Module:
    """Build the mixer for ``letter``; ``window_size`` and ``window_kernel`` go to W only, ``linear_cfg`` to L only.

    ``linear_cfg`` (keys and values), ``window_size`` and ``window_kernel`` are checked whatever the letter, so a typo
    never hides behind an arch without L or W layers until a search or a later arch reaches one.
    """
    linear_cfg = dict(linear_cfg or {})
    unknown = sorted(set(linear_cfg) - set(LINEAR_CFG_KEYS))
    if unknown:
        raise TypeError(f'unknown linear_cfg key(s) {unknown}; valid keys: {list(LINEAR_CFG_KEYS)}')
    cls = get_mixer_cls(letter)
    # the mixers' own checks, on a 2-channel stand-in, for the options this letter does not use (with the global
    # RNG state restored: building a model must draw the same random numbers whatever its letters)
    with torch.random.fork_rng(devices=[]):
        if cls is not WindowAttention:
            WindowAttention(dim=2, num_heads=1, window_size=window_size, kernel=window_kernel)
        if cls is not LinearAttention:
            LinearAttention(dim=2, num_heads=1, **linear_cfg)
    common = dict(dim=dim, num_heads=num_heads, qkv_bias=qkv_bias, proj_bias=proj_bias,
                  num_prefix_tokens=num_prefix_tokens, rotate_half=rotate_half, attn_drop=attn_drop,
                  proj_drop=proj_drop)
    if cls is WindowAttention:
        return WindowAttention(**common, window_size=window_size, kernel=window_kernel)
    if cls is LinearAttention:
        return LinearAttention(**common, **linear_cfg)
    return cls(**common)


def mixing_args(args: Optional[Dict[str, Any]], letters: str = 'LW') -> Dict[str, Any]:
    """What the ``letters`` layers compute beyond their parameters, defaults filled in: the W window
    (``window_size``) and every L option (``linear_cfg.<key>``). These options have no parameters of their own (or
    the same ones), so weights trained with other values load without complaint and compute something else.
    Deployment switches that change only rounding (``linear_cfg.precision``, ``linear_cfg.kernel``, the W
    ``window_kernel``) are not part of it."""
    args = args or {}
    out: Dict[str, Any] = {}
    if 'W' in letters:
        default = inspect.signature(build_mixer).parameters['window_size'].default
        out['window_size'] = args.get('window_size') or default
    if 'L' in letters:
        linear = {k: p.default for k, p in inspect.signature(LinearAttention.__init__).parameters.items()
                  if k in LINEAR_CFG_KEYS}
        linear.update(args.get('linear_cfg') or {})
        linear.pop('kernel_init')  # how the conv starts: trained weights compute the same either way
        linear.pop('precision')  # where bf16 rounds under autocast: the same computation (a deployment switch)
        linear.pop('kernel')  # which implementation runs: the same computation (a deployment switch)
        out.update({f'linear_cfg.{k}': v for k, v in linear.items()})
    return out


def mixing_differences(saved: Optional[Dict[str, Any]], given: Optional[Dict[str, Any]],
                       letters: str = 'LW') -> Dict[str, Tuple[Any, Any]]:
    """``{option: (saved value, given value)}`` for the :func:`mixing_args` of ``letters`` that differ."""
    ran, now = mixing_args(saved, letters), mixing_args(given, letters)
    return {k: (ran[k], now[k]) for k in ran if ran[k] != now[k]}


__all__ = [
    'CONV_VARIANTS', 'LINEAR_CFG_KEYS', 'MIXERS', 'FullAttention', 'LinearAttention', 'SqueezeDynamicConv',
    'StaticDepthwiseConv', 'TokenDynamicConv', 'WindowAttention', 'build_mixer', 'get_mixer_cls', 'mixing_args',
    'mixing_differences', 'validate_arch',
]
