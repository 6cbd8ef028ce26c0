"""One checkpoint file, read once (:func:`read`), applied to a model (:func:`apply_checkpoint`), written (:func:`save`).

Reading is safe: safetensors, or torch's weights-only unpickler with torch's safe globals (``import jetvit_mm.mm``
adds exactly the data types of an mmengine runner checkpoint: ``HistoryBuffer``, numpy values), nothing else. The
file's zip CRCs and tensor digest are checked (:mod:`.integrity`), the config text it carries is made literal-only
(:mod:`.config_text`), and a ``.pth`` naming a sharded FSDP2 directory gets its weights from there (:mod:`.sharded`).

Applying is the one way weights go into a model, as timm's ``load_checkpoint``: a model contributes only its key map
(``checkpoint_filter_fn``), each JetViT's saved arch spec is decoded and checked once, one report names the keys that
do not fit.
"""
import dataclasses
import functools
import pickle
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import torch
from torch import nn

from ...jsonio import atomic_write
from ..arch import SPEC_KEY, ArchSpec, check_spec, spec_from_state
from .config_text import neutralise_config_text
from .formats import strip_prefix, strip_wrapper_prefix, to_jetvit_names
from .integrity import check_zip_records, unpickling_refusal, verify_digest, with_digest

StateDict = Dict[str, torch.Tensor]
WRAPPER_KEYS = ('state_dict', 'model', 'module', 'teacher')
RUNNER_PREFIXES = ('student.', 'backbone.')  # where a runner checkpoint holds its JetViT


@dataclass
class Checkpoint:
    """A checkpoint as :func:`read` it: ``raw`` the loaded object (a runner checkpoint's ``meta``, ``message_hub``,
    ``optimizer``, ...), ``meta`` its ``'meta'`` dict. The rest is worked out when first asked for: ``state`` (its
    state dict of tensors: wrapper key, DDP ``module.`` prefix and the asked ``prefix`` removed), and of its JetViT (a
    runner checkpoint's under ``student.`` or ``backbone.``): ``spec`` (what it was saved with; None: not known, e.g. a
    teacher file), ``jetvit_state`` and ``format`` (its weights in JetViT names, from the detected format)."""

    path: Path
    raw: Any
    meta: Dict[str, Any]
    prefix: Optional[str] = None

    @functools.cached_property
    def state(self) -> StateDict:
        state = unwrap_state(self.raw, self.path)
        if not self.prefix:
            return state
        prefix = self.prefix if self.prefix.endswith('.') else self.prefix + '.'
        if not any(k.startswith(prefix) for k in state):
            roots = sorted({k.split('.')[0] + '.' for k in state})
            raise ValueError(f'{self.path} has no weights under the prefix {prefix!r}; its top-level prefixes are '
                             f'{roots[:12]}')
        return strip_prefix(state, prefix)

    @functools.cached_property
    def jetvit_prefix(self) -> str:
        return next((p for p in RUNNER_PREFIXES if any(k.startswith(p) for k in self.state)), '')

    @functools.cached_property
    def spec(self) -> Optional[ArchSpec]:
        return spec_from_state(self.state, self.jetvit_prefix, str(self.path))

    @functools.cached_property
    def _converted(self) -> Tuple[StateDict, str]:
        prefix = self.jetvit_prefix
        return to_jetvit_names(strip_prefix(self.state, prefix) if prefix else self.state)

    @property
    def jetvit_state(self) -> StateDict:
        return self._converted[0]

    @property
    def format(self) -> str:
        return self._converted[1]


def read(path: Union[str, Path, Checkpoint], prefix: Optional[str] = None, mmap: bool = False) -> Checkpoint:
    """The checkpoint ``path`` (``.pth``, ``.safetensors``), opened once and checked; a :class:`Checkpoint` read
    already is itself. ``prefix`` (``'backbone.'``): only the weights under it count, prefix removed. ``mmap``: map a
    zip ``.pth`` instead of reading it (its tensors read from the file as they are used; only the pickle's CRC is
    checked, not the tensor digest)."""
    if isinstance(path, Checkpoint):
        return dataclasses.replace(path, prefix=prefix) if prefix else path
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f'checkpoint not found: {path}')
    if path.suffix == '.safetensors':
        return Checkpoint(path, _load_safetensors(path), {}, prefix)
    raw = neutralise_config_text(torch_load(path, mmap=mmap))
    meta = raw.get('meta') if isinstance(raw, dict) and isinstance(raw.get('meta'), dict) else {}
    if meta.get('fsdp2') == 'sharded':  # an FSDP2 runner checkpoint: its weights are in the .dcp directory it names
        from .sharded import fill_sharded_state
        raw = fill_sharded_state(raw, str(path))
    return Checkpoint(path, raw, meta, prefix)


def save(checkpoint: dict, path: Union[str, Path]) -> Path:
    """``torch.save`` of ``checkpoint`` with the digest of its tensors in its meta, written atomically."""
    with_digest(checkpoint)
    return atomic_write(path, lambda f: torch.save(checkpoint, f))


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
    """Apply ``checkpoint`` (a :class:`Checkpoint`, e.g. ``read(path, prefix)``; or a state dict) to ``model``.

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


def torch_load(path: Union[str, Path], mmap: bool = False) -> Any:
    """``torch.load(path, weights_only=True)`` to the CPU with the file's integrity checked, the file opened once: a
    zip checkpoint's records must pass their CRC-32 (with ``mmap``, only the pickle's record) and a checkpoint read
    whole must match the tensor digest in its meta, if it has one. A file that is not a readable torch checkpoint
    is reported as such, naming the file; a refused pickle raises :class:`UnsafeCheckpointError`. A legacy (non-zip)
    file is read whole also when ``mmap`` is asked (torch maps only zip files)."""
    with open(path, 'rb') as f:
        head = f.read(2)
        if head != b'PK' and head[:1] != b'\x80':  # torch writes a zip archive, or (legacy) a protocol-2+ pickle
            raise ValueError(f'{path} is not a readable torch checkpoint (truncated, corrupt or not a torch file): it '
                             f'{f"starts with {head!r}" if head else "is empty"}, neither a zip archive nor a pickle; '
                             'copy or save it again, or check the path')
        mmap = mmap and head == b'PK'
        if head == b'PK':
            f.seek(0)
            check_zip_records(f, names=('data.pkl',) if mmap else None, source=path)
        f.seek(0)
        try:  # torch maps a file by its name
            checkpoint = torch.load(path if mmap else f, map_location='cpu', weights_only=True, mmap=mmap)
        except pickle.UnpicklingError as refused:
            raise unpickling_refusal(path, refused) from None
        except (RuntimeError, OSError, EOFError, KeyError, ValueError, IndexError, AttributeError) as error:
            raise ValueError(f'{path} is not a readable torch checkpoint (truncated, corrupt or not a torch file: '
                             f'{type(error).__name__}: {error}); copy or save it again') from error
    if not mmap:
        verify_digest(checkpoint, path)
    return checkpoint


def _load_safetensors(path: Path) -> StateDict:
    """The tensors of a ``.safetensors`` file, parsed by safetensors (which never unpickles). A file it cannot parse
    is refused with the file named: as a torch checkpoint under that name when it starts like one (a zip archive, or
    a pickle: 0x80 and a protocol 2-5), else as not readable. The first bytes only word that error: a valid file's
    header length (its first 8 bytes) may start with any bytes."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device='cpu')
    except (SafetensorError, OSError) as error:
        failure = error
    with open(path, 'rb') as f:
        head = f.read(2)
    kind = 'a zip archive' if head == b'PK' else 'a pickle' if len(head) == 2 and head[0] == 0x80 and \
        2 <= head[1] <= 5 else None
    if kind is not None:
        raise ValueError(f'{path} is named .safetensors but holds a torch checkpoint ({kind}), not safetensors; '
                         f'if it is one, rename it .pth to load it with torch.load(weights_only=True)')
    raise ValueError(f'{path} is not a readable .safetensors file (truncated, corrupt or another format: {failure}); '
                     'copy or save it again')


def unwrap_state(state: Any, path: Union[str, Path]) -> StateDict:
    """The state dict of tensors of a loaded checkpoint (under one of :data:`WRAPPER_KEYS`, or itself), without a
    DistributedDataParallel ``module.`` prefix; ValueError naming ``path`` when it holds none."""
    for key in WRAPPER_KEYS:
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
            break
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ValueError(f'{path} does not hold a state dict of tensors')
    return dict(strip_wrapper_prefix(state))
