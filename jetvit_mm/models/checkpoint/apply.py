"""The one way weights go into a model, as timm's ``load_checkpoint``: a model contributes only its key map
(``checkpoint_filter_fn``), each JetViT's saved arch spec is decoded and checked once, one report names the keys
that do not fit."""
from collections import OrderedDict
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import torch
from torch import nn

from ..arch import SPEC_KEY, ArchSpec, check_spec, spec_from_state
from .io import Checkpoint, read

StateDict = Dict[str, torch.Tensor]


@dataclass
class LoadReport:
    """torch's incompatible keys with the shapes: ``state`` what loads (the model's keys that fit), ``missing`` and
    ``unexpected`` keys, ``mis_shaped`` ones (``'key: checkpoint (...) vs model (...)'``)."""

    state: StateDict
    missing: List[str]
    unexpected: List[str]
    mis_shaped: List[str]

    def describe(self, source: str, target: str, unexpected: bool = True) -> Optional[str]:
        """``'<source> does not fit <target>'`` and a line per kind of key that does not fit; None if all fit."""
        kinds = (('missing keys', self.missing), ('unexpected keys', self.unexpected if unexpected else []),
                 ('shape mismatches', self.mis_shaped))
        lines = [f'{title}: ' + ', '.join(keys[:12]) + (f', ... ({len(keys)} in all)' if len(keys) > 12 else '')
                 for title, keys in kinds if keys]
        return '\n'.join([f'{source} does not fit {target}', *lines]) if lines else None


def apply_checkpoint(model: nn.Module, checkpoint: Union[Checkpoint, Mapping[str, torch.Tensor]],
                     prefix: Optional[str] = None, strict: bool = True, allow_unexpected: bool = False,
                     skip: Sequence[str] = (), load: bool = True, source: Optional[str] = None,
                     target: Optional[str] = None) -> LoadReport:
    """Apply ``checkpoint`` (a :class:`~.io.Checkpoint`, ``prefix``: its part under it; or a state dict) to ``model``.

    A JetViT or supernet takes the checkpoint's JetViT (a runner checkpoint's ``student.`` / ``backbone.``, converted
    from its format); any other model the whole state, through its ``checkpoint_filter_fn(state, source)`` if it has
    one, each JetViT in it its part (``skip``: parts left as they are). Each JetViT's saved spec is checked (ValueError
    naming the file), its keys mapped by its ``checkpoint_filter_fn``; it may lack its spec, RoPE periods and, from a
    teacher (no spec, or all F), all new mixer parameters. ``strict``: missing, mis-shaped (and unless
    ``allow_unexpected``, unexpected) keys raise RuntimeError naming them, before any copy; else what fits loads.
    ``load=False``: check only; the report's ``state`` is what would load."""
    if prefix:
        checkpoint = read(checkpoint, prefix)
    source = source or str(getattr(checkpoint, 'path', 'state dict'))
    named, skip = source, tuple(skip)
    if _is_jetvit(model):
        if isinstance(checkpoint, Checkpoint):
            state, saved = dict(checkpoint.jetvit_state), checkpoint.spec
            named = f'{source} ({checkpoint.format} format)'
        else:
            state, saved = dict(checkpoint), spec_from_state(checkpoint, '', source)
        state.pop(SPEC_KEY, None)
        state, optional = _jetvit_part(model, state, saved, source, 'JetViT')
    else:
        state, optional = _model_state(model, checkpoint, source, skip)
    own = {k: v for k, v in model.state_dict().items() if not k.startswith(skip)}
    report = LoadReport(OrderedDict((k, v) for k, v in state.items() if k in own and v.shape == own[k].shape),
                        sorted(k for k in own if k not in state and k not in optional),
                        sorted(k for k in state if k not in own),
                        sorted(f'{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}'
                               for k, v in state.items() if k in own and v.shape != own[k].shape))
    message = report.describe(named, target or _name(model), unexpected=not allow_unexpected)
    if strict and message:
        raise RuntimeError(message)
    if load:
        if getattr(checkpoint, '_metadata', None) is not None:  # module versions (torch's own state dicts)
            report.state._metadata = checkpoint._metadata
        model.load_state_dict(report.state, strict=False)
    return report


def _model_state(model: nn.Module, checkpoint: Union[Checkpoint, Mapping[str, torch.Tensor]], source: str,
                 skip: Tuple[str, ...]) -> Tuple[StateDict, Set[str]]:
    """A whole model's state and the keys it may lack, each JetViT's part checked and mapped."""
    filter_fn = getattr(model, 'checkpoint_filter_fn', None)
    state = checkpoint.state if isinstance(checkpoint, Checkpoint) else checkpoint
    state = {k: v for k, v in (filter_fn(state, source) if filter_fn else state).items() if not k.startswith(skip)}
    optional: Set[str] = set()
    parts: List[str] = []  # (no JetViT inside a JetViT)
    for name, module in model.named_modules():
        part = name + '.'
        if _is_jetvit(module) and name and not part.startswith((*skip, *parts)):
            parts.append(part)
            saved = spec_from_state(state, part, source)
            own = {k[len(part):]: v for k, v in state.items() if k.startswith(part) and k != part + SPEC_KEY}
            mapped, lenient = _jetvit_part(module, own, saved, source, 'model')
            state = {**{k: v for k, v in state.items() if not k.startswith(part)},
                     **{part + k: v for k, v in mapped.items()}}
            optional |= {part + k for k in lenient}
    return state, optional


def _jetvit_part(jetvit: nn.Module, state: StateDict, saved: Optional[ArchSpec], source: str,
                 what: str) -> Tuple[StateDict, Set[str]]:
    """A JetViT's weights (its spec taken out) checked against the spec they were saved with and mapped by its key
    map; and the keys it may lack."""
    check_spec(saved, jetvit.spec, source, what='supernet' if saved is not None and saved.is_supernet else what)
    state = jetvit.checkpoint_filter_fn(state, source, saved)
    optional = {SPEC_KEY, 'rope.periods'}
    new = set(jetvit.new_parameter_names())
    if (saved is None or saved.is_teacher) and not new & state.keys():  # a file with some of them must have all
        optional |= new
    return state, optional


def _is_jetvit(module: nn.Module) -> bool:
    """A JetViT or supernet (what has a ``spec``, a ``checkpoint_filter_fn`` and the new parameters a teacher lacks;
    not imported: jetvit.py imports this package)."""
    return hasattr(type(module), 'new_parameter_names')


def _name(model: nn.Module) -> str:
    """``JetViT(dinov3_vitb16, embed_dim=768, ...)``: a model's class and ``extra_repr``."""
    extra = model.extra_repr()
    return f'{type(model).__name__}({extra})' if extra else type(model).__name__
