"""The JetViT supernet: per layer a set of candidate mixers, one active path at a time."""
from typing import Dict, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from .arch import SPEC_KEY, ArchSpec
from .checkpoint import apply_checkpoint
from .jetvit import TEACHER_ATTN_PARAMS, JetViT
from .mixers import MIXERS, validate_arch

SearchSpace = Tuple[str, ...]


def parse_search_space(space: Union[str, Sequence[str]], depth: int, letters: Optional[str] = None) -> SearchSpace:
    """Per-layer candidate letters: ``'LW'`` (every layer) or one string per layer, e.g. ``['LF', 'WF', ...]``,
    each one of ``letters`` (a model's declared letters; default L, W, F)."""
    letters = ''.join(sorted(MIXERS)) if letters is None else letters
    layers = [space] * depth if isinstance(space, str) else list(space)
    if len(layers) != depth:
        raise ValueError(f'search space has {len(layers)} layers, expected one per layer: {depth}')
    out = []
    for i, options in enumerate(layers):
        if not isinstance(options, str) or not options:
            raise ValueError(f'layer {i}: candidates must be a non-empty string of mixer letters, got {options!r}')
        bad = sorted(set(options) - set(letters))
        if bad:
            raise ValueError(f'layer {i}: unknown mixer letter(s) {bad} in search space {options!r}; valid letters: '
                             f'{", ".join(sorted(letters))} (the declared ones; more are declared with mixers=...)')
        out.append(''.join(dict.fromkeys(options)))  # de-duplicated, order kept
    return tuple(out)


def step2_search_space(step1_arch: str, letters: Optional[str] = None) -> SearchSpace:
    """Step 2 of the search: each layer keeps its Step-1 winner or becomes full attention."""
    validate_arch(step1_arch, letters=letters)
    return tuple(letter if letter == 'F' else letter + 'F' for letter in step1_arch)


class SupernetMixer(nn.Module):
    """Candidate mixers of one layer (each with its own q/k/v/o); ``active`` names the one that runs."""

    def __init__(self, candidates: Dict[str, nn.Module]) -> None:
        super().__init__()
        self.candidates = nn.ModuleDict(candidates)
        self.active = next(iter(candidates))

    def forward(self, x: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor] = None):
        return self.candidates[self.active](x, grid_size, rope)


class JetViTSupernet(JetViT):
    """A JetViT whose layers hold several candidate mixers, initialised from the teacher's attention.

    Norms, MLPs and LayerScale are shared; each candidate has its own copy of q/k/v/o (one whose mixer inherits nothing
    keeps its own initialisation). ``set_arch`` picks the active path; ``extract_subnet`` / ``subnet_state_dict`` turn
    a path into a plain :class:`JetViT`.

    Args:
        search_space: candidate letters per layer (a string for every layer, or one string per layer; any number);
            default: every declared letter except F (Step 1; ``'LW'`` for the default letters).
        step1_arch: Step 2's space from Step 1's winner: each layer {its Step-1 letter, F}.
        freeze_mlp: keep the shared MLPs fixed (Jet-Nemotron's PostNAS does).
        Other arguments as :class:`JetViT` (its ``arch`` is the initial active path, default each layer's first).
    """

    def __init__(self, search_space: Optional[Union[str, Sequence[str]]] = None, step1_arch: Optional[str] = None,
                 arch: Optional[str] = None, checkpoint: Optional[str] = None, inherit: str = 'all',
                 freeze_mlp: bool = False, **jetvit_args) -> None:
        super().__init__(**jetvit_args)
        letters = self.mixer_table.letters
        if step1_arch is not None:
            if search_space is not None:
                raise ValueError('give either search_space or step1_arch (Step 2: each layer {winner, F}), not both')
            search_space = step2_search_space(validate_arch(step1_arch, self.depth, letters), letters)
        if search_space is None:
            search_space = self.mixer_table.efficient_letters or 'F'
        self.search_space = parse_search_space(search_space, self.depth, letters)
        for block, options in zip(self.blocks, self.search_space):
            teacher_attn = block.attn
            candidates = {}
            for letter in options:
                mixer = self.mixer_table.build(letter, **self.mixer_args)
                if mixer.inherits == 'qkv_proj':  # 'none': the candidate keeps its own initialisation
                    with torch.no_grad():
                        mixer.qkv.load_state_dict(teacher_attn.qkv.state_dict())
                        mixer.proj.load_state_dict(teacher_attn.proj.state_dict())
                candidates[letter] = mixer
            block.attn = SupernetMixer(candidates)
        if checkpoint is not None:
            self.load_checkpoint(checkpoint)
        self.inherit = inherit
        if inherit == 'mlp':
            self.reset_efficient_mixers()
        self.freeze_mlp = freeze_mlp
        if freeze_mlp:
            for block in self.blocks:
                block.mlp.requires_grad_(False)
        self.set_arch(arch if arch is not None else ''.join(options[0] for options in self.search_space))

    @property
    def spec(self) -> ArchSpec:
        """A supernet holds no single arch: its spec names the candidates of each layer."""
        return ArchSpec.build(self.model_name, self.build_args, search_space=self.search_space)

    def set_arch(self, arch: str) -> None:
        """Activate one candidate per layer; ValueError naming the layer and its candidates otherwise."""
        validate_arch(arch, self.depth, self.mixer_table.letters)
        for i, (letter, options) in enumerate(zip(arch, self.search_space)):
            if letter not in options:
                raise ValueError(f'arch {arch!r}: layer {i} has no {letter!r} candidate (candidates: {options})')
        for letter, block in zip(arch, self.blocks):
            block.attn.active = letter
        self.arch = arch

    def reset_efficient_mixers(self) -> None:
        """Re-initialise q/k/v/o of every non-F candidate (``inherit='mlp'``)."""
        for block in self.blocks:
            for letter, mixer in block.attn.candidates.items():
                if letter != 'F' and getattr(mixer, 'inherits', 'qkv_proj') == 'qkv_proj':
                    for layer in (mixer.qkv, mixer.proj):
                        nn.init.trunc_normal_(layer.weight, std=.02)
                        if layer.bias is not None:
                            nn.init.zeros_(layer.bias)

    def checkpoint_filter_fn(self, state: Dict[str, torch.Tensor], source: str = 'state dict',
                             saved: Optional[ArchSpec] = None) -> Dict[str, torch.Tensor]:
        """JetViT's key map, then plain JetViT / teacher weights expanded: each layer's attention weights go to every
        candidate; the teacher's q/k/v/o only to those that inherit them (``inherits = 'qkv_proj'``): a candidate that
        inherits nothing keeps its own initialisation."""
        expanded = {}
        for key, value in super().checkpoint_filter_fn(state, source, saved).items():
            parts = key.split('.')
            if parts[0] == 'blocks' and parts[2] == 'attn' and parts[3] != 'candidates' and int(parts[1]) < self.depth:
                layer = int(parts[1])
                teacher_param = '.'.join(parts[3:]) in TEACHER_ATTN_PARAMS
                for letter in self.search_space[layer]:
                    if teacher_param and self.blocks[layer].attn.candidates[letter].inherits == 'none':
                        continue
                    expanded['.'.join(parts[:3] + ['candidates', letter] + parts[3:])] = value
            else:
                expanded[key] = value  # (a layer this model lacks is reported as unexpected)
        return expanded

    def subnet_state_dict(self, arch: str) -> Dict[str, torch.Tensor]:
        """Weights of the plain JetViT for ``arch``: shared weights plus the chosen candidates'."""
        self._check_arch(arch)
        out = {}
        for key, value in self.state_dict().items():
            parts = key.split('.')
            if parts[0] == 'blocks' and parts[2] == 'attn':
                if parts[4] != arch[int(parts[1])]:
                    continue
                key = '.'.join(parts[:3] + parts[5:])
            out[key] = value
        out[SPEC_KEY] = ArchSpec.build(self.model_name, self.build_args, arch=arch).to_tensor()  # the subnet's
        return out

    def extract_subnet(self, arch: str) -> JetViT:
        """A standalone :class:`JetViT` with ``arch`` and this supernet's weights for that path, on the supernet's
        device and in its dtype."""
        subnet = JetViT(arch=arch, **self.build_args)
        apply_checkpoint(subnet, self.subnet_state_dict(arch), source='supernet path')
        weight = self.patch_embed.proj.weight
        return subnet.to(device=weight.device, dtype=weight.dtype).train(self.training)

    def _check_arch(self, arch: str) -> None:
        current = self.arch
        self.set_arch(arch)  # validates
        self.set_arch(current)
