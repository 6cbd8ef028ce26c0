"""Checking the mixer contract (:mod:`~jetvit_mm.models.mixers.base`): the signatures of a class, and one probe call
of a built mixer on a tiny input, when a model is built."""
import inspect
from typing import Any, Dict, Mapping, Optional, Sequence

import torch
from torch import nn

from .base import COMMON_ARGS, INHERITS

__all__ = ['MixerContractError', 'check_class', 'own_parameters', 'probe_mixer']

PROBE_GRID = (2, 3)


class MixerContractError(ValueError):
    """A registered mixer class that breaks the mixer contract (wrong signature, wrong output shape, ...)."""


def _what(letter: str, type_name: str) -> str:
    return f'mixer {letter!r} ({type_name})'


def own_parameters(cls: type) -> Dict[str, inspect.Parameter]:
    """The constructor's named parameters beyond the common ones (the letter's own options)."""
    params = inspect.signature(cls).parameters
    return {name: p for name, p in params.items() if name not in COMMON_ARGS
            and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


def _takes_any_keyword(cls: type) -> bool:
    return any(p.kind == inspect.Parameter.VAR_KEYWORD for p in inspect.signature(cls).parameters.values())


def check_class(letter: str, type_name: str, cls: type, options: Mapping[str, Any],
                option_names: Optional[Mapping[str, str]] = None) -> None:
    """Check what can be checked without building: ``inherits``, the constructor's and ``forward``'s signatures and
    the options given. ``option_names`` shows an option as the user wrote it (``mixers.L.conv``)."""
    what = _what(letter, type_name)
    shown = dict(option_names or {})
    if getattr(cls, 'inherits', None) not in INHERITS:
        raise MixerContractError(f'{what} breaks the mixer contract: its class attribute `inherits` is '
                                 f'{getattr(cls, "inherits", None)!r}, expected one of {list(INHERITS)} (which teacher '
                                 f'weights it takes; jetvit_mm.models.mixers.base)')
    named = set(inspect.signature(cls).parameters)
    any_keyword = _takes_any_keyword(cls)
    missing = [a for a in COMMON_ARGS if a not in named] if not any_keyword else []
    if missing:
        raise MixerContractError(f'{what} breaks the mixer contract (wrong signature): its constructor does not take '
                                 f'{missing}; a mixer is built as cls({", ".join(COMMON_ARGS)}, **options)')
    own = own_parameters(cls)
    if not any_keyword:
        unknown = [k for k in options if k not in own]
        if unknown:
            names = [shown.get(k, k) for k in unknown]
            raise TypeError(f'{what}: unknown option(s) {names}; valid options: {[shown.get(k, k) for k in own]}')
    required = [k for k, p in own.items() if p.default is inspect.Parameter.empty and k not in options]
    if required:
        raise TypeError(f'{what}: needs option(s) {required} (no default), e.g. mixers[{letter!r}] = '
                        f'dict(type={type_name!r}, {required[0]}=...)')
    forward = inspect.signature(cls.forward)
    try:
        forward.bind(None, 'x', 'grid_size', 'rope')
    except TypeError:
        raise MixerContractError(f'{what} breaks the mixer contract (wrong signature): forward{forward} cannot be '
                                 f'called as forward(x, grid_size, rope)') from None


def _check_projections(what: str, mixer: nn.Module, dim: int, qkv_bias: bool, proj_bias: bool) -> None:
    for name, shape, bias in (('qkv', (3 * dim, dim), qkv_bias), ('proj', (dim, dim), proj_bias)):
        layer = getattr(mixer, name, None)
        if not isinstance(layer, nn.Linear) or tuple(layer.weight.shape) != shape or (layer.bias is not None) != bias:
            got = (f'nn.Linear weight {tuple(layer.weight.shape)}, bias {layer.bias is not None}'
                   if isinstance(layer, nn.Linear) else type(layer).__name__)
            raise MixerContractError(f'{what} breaks the mixer contract: inherits="qkv_proj" needs `{name}` = '
                                     f'nn.Linear with weight {shape} and bias {bias} (the teacher\'s), got {got}')


def probe_mixer(letter: str, type_name: str, mixer: nn.Module, dim: int, num_prefix_tokens: int,
                qkv_bias: bool, proj_bias: bool, rope_dim: Optional[int]) -> None:
    """Call ``mixer`` once on ``[1, prefix + 2 * 3, dim]`` tokens (with a RoPE table when ``rope_dim``, the head
    dim, is given) on its own device and check its projections and output shape. Gradients are recorded, so that
    the torch paths run (no kernel compiles), except for a mixer built under ``torch.inference_mode()``."""
    what = _what(letter, type_name)
    if getattr(mixer, 'inherits', None) == 'qkv_proj':
        _check_projections(what, mixer, dim, qkv_bias, proj_bias)
    tensors = list(mixer.parameters()) + list(mixer.buffers())
    device = tensors[0].device if tensors else torch.device('cpu')
    h, w = PROBE_GRID
    record = not any(t.is_inference() for t in tensors)
    with torch.inference_mode(False), torch.set_grad_enabled(record):
        x = torch.randn(1, num_prefix_tokens + h * w, dim, device=device).requires_grad_(record)
        rope = torch.randn(h * w, 2 * rope_dim, device=device) if rope_dim else None
        training = mixer.training
        mixer.eval()
        try:
            out = mixer(x, PROBE_GRID, rope)
        finally:
            mixer.train(training)
    if not torch.is_tensor(out) or tuple(out.shape) != tuple(x.shape):
        got = tuple(out.shape) if torch.is_tensor(out) else type(out).__name__
        raise MixerContractError(f'{what} breaks the mixer contract (wrong output shape): for input {tuple(x.shape)} '
                                 f'(grid {PROBE_GRID}, {num_prefix_tokens} prefix tokens) it returned {got}; a mixer '
                                 f'returns [B, N, D] like its input')


def probe_failure(letter: str, type_name: str, error: BaseException, shapes: Sequence[int]) -> MixerContractError:
    """The contract error for a mixer whose probe call raised ``error``."""
    return MixerContractError(f'{_what(letter, type_name)} breaks the mixer contract: calling it on tokens of shape '
                              f'{tuple(shapes)} (grid {PROBE_GRID}) raised {type(error).__name__}: {error}')
