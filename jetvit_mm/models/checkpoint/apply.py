"""The one way weights go into a model, as timm's ``load_checkpoint``: a model contributes only its key map
(``checkpoint_filter_fn``), each JetViT's saved arch spec is decoded and checked once, one report names the keys
that do not fit."""
from collections import OrderedDict
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import torch
from torch import nn

from ..arch import SPEC_KEY, check_spec, spec_from_state
from .io import Checkpoint

StateDict = Dict[str, torch.Tensor]


class CheckpointMismatch(ValueError, RuntimeError):
    """Weights that do not fit a model: bad input (ValueError), as torch's strict ``load_state_dict`` (RuntimeError)."""


@dataclass
class LoadReport:
    """torch's incompatible keys with the shapes: ``state`` what loads (the model's keys that fit), ``missing`` and
    ``unexpected`` keys, ``mis_shaped`` ones (``'key: checkpoint (...) vs model (...)'``)."""

    state: StateDict
    missing: List[str]
    unexpected: List[str]
    mis_shaped: List[str]

    def describe(self, source: str, target: str, unexpected: bool = True) -> Optional[str]:
        """``'<source> does not fit <target>'``, a line per kind of key that does not fit and what to do; None if all
        fit."""
        kinds = (('missing keys', self.missing), ('unexpected keys', self.unexpected if unexpected else []),
                 ('shape mismatches', self.mis_shaped))
        lines = [f'{title}: ' + ', '.join(keys[:12]) + (f', ... ({len(keys)} in all)' if len(keys) > 12 else '')
                 for title, keys in kinds if keys]
        return '\n'.join([f'{source} does not fit {target}', *lines, 'give a checkpoint of this model, or build the '
                          'model (its config) the checkpoint was saved from']) if lines else None


def apply_checkpoint(model: nn.Module, checkpoint: Union[Checkpoint, Mapping[str, torch.Tensor]], strict: bool = True,
                     allow_unexpected: bool = False, skip: Sequence[str] = (), load: bool = True,
                     source: Optional[str] = None, target: Optional[str] = None) -> LoadReport:
    """Apply ``checkpoint`` (a :class:`~.io.Checkpoint`, e.g. ``read(path, prefix)``; or a state dict) to ``model``.

    A JetViT or supernet takes the checkpoint's JetViT (a runner checkpoint's ``student.`` / ``backbone.``, converted
    from its format); any other model the whole state, through its ``checkpoint_filter_fn(state, source)`` if it has
    one, each JetViT in it its part (``skip``: parts left as they are). Each JetViT's saved spec is checked (ValueError
    naming the file), its keys mapped by its ``checkpoint_filter_fn``; it may lack its spec, RoPE periods and, from a
    teacher (no spec, or all F), all new mixer parameters. ``strict``: missing, mis-shaped (and unless
    ``allow_unexpected``, unexpected) keys raise :class:`CheckpointMismatch` naming them, before any copy; else what
    fits loads. ``load=False``: check only; the report's ``state`` is what would load."""
    source = source or str(getattr(checkpoint, 'path', 'state dict'))
    named, skip, jetvit = source, tuple(skip), _is_jetvit(model)
    state = checkpoint
    if isinstance(checkpoint, Checkpoint):
        state = checkpoint.jetvit_state if jetvit else checkpoint.state
        named = f'{source} ({checkpoint.format} format)' if jetvit else source
    filter_fn = None if jetvit else getattr(model, 'checkpoint_filter_fn', None)
    state = {k: v for k, v in (filter_fn(state, source) if filter_fn else state).items() if not k.startswith(skip)}
    state, optional = _map_jetvits(model, state, source, skip)
    own = {k: v for k, v in model.state_dict().items() if not k.startswith(skip)}
    report = LoadReport(OrderedDict((k, v) for k, v in state.items() if k in own and v.shape == own[k].shape),
                        sorted(k for k in own if k not in state and k not in optional),
                        sorted(k for k in state if k not in own),
                        sorted(f'{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}'
                               for k, v in state.items() if k in own and v.shape != own[k].shape))
    message = report.describe(named, target or _name(model), unexpected=not allow_unexpected)
    if strict and message:
        raise CheckpointMismatch(message)
    if load:
        if getattr(checkpoint, '_metadata', None) is not None:  # module versions (torch's own state dicts)
            report.state._metadata = checkpoint._metadata
        model.load_state_dict(report.state, strict=False)
    return report


def _map_jetvits(model: nn.Module, state: StateDict, source: str, skip: Tuple[str, ...]) -> Tuple[StateDict, Set[str]]:
    """``state`` with the part of each JetViT in ``model`` (``model`` itself, or ``backbone``, ``student``, ...)
    checked against the spec it was saved with (decoded once) and mapped by its key map; and the keys it may lack:
    its spec, RoPE periods and, from a teacher (no spec, or all F), its new mixer parameters when it has none."""
    optional: Set[str] = set()
    parts: Tuple[str, ...] = ()  # (no JetViT inside a JetViT)
    for name, module in model.named_modules():
        part = f'{name}.' if name else ''
        if not _is_jetvit(module) or (skip + parts and part.startswith(skip + parts)):
            continue
        parts += (part, )
        saved = spec_from_state(state, part, source)
        what = 'supernet' if saved is not None and saved.is_supernet else 'model' if part else 'JetViT'
        check_spec(saved, module.spec, source, what=what)
        own = {k[len(part):]: v for k, v in state.items() if k.startswith(part) and k != part + SPEC_KEY}
        mapped = module.checkpoint_filter_fn(own, source, saved)
        state = {k: v for k, v in state.items() if not k.startswith(part)}
        state.update((part + k, v) for k, v in mapped.items())
        new = set(module.new_parameter_names())
        teacher = (saved is None or saved.is_teacher) and not new & mapped.keys()  # with some of them, all are due
        optional |= {part + k for k in {SPEC_KEY, 'rope.periods'} | (new if teacher else set())}
    return state, optional


def _is_jetvit(module: nn.Module) -> bool:
    """A JetViT or supernet, known by the new parameters a teacher lacks (jetvit.py imports this package)."""
    return hasattr(type(module), 'new_parameter_names')


def _name(model: nn.Module) -> str:
    """``JetViT(dinov3_vitb16, embed_dim=768, ...)``: a model's class and ``extra_repr``."""
    extra = model.extra_repr()
    return f'{type(model).__name__}({extra})' if extra else type(model).__name__
