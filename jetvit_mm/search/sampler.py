"""Single-path sampling for supernet training: the path of iteration i is a pure function of (seed, i), identical on
every distributed rank and continued by a resumed run without any stored random state."""
import random
from typing import Optional, Sequence

SAMPLER_MODES = ('uniform', 'budgeted')


class SupernetSampler:
    """Draws one candidate per layer from ``search_space`` for each training iteration.

    Args:
        search_space: candidate letters per layer (e.g. ``('LW',) * 12``).
        mode: ``'uniform'`` (each layer independently) or ``'budgeted'`` (number of F layers drawn uniformly
            in ``[min_full, max_full]``, then the F layers, then the other layers uniformly among non-F).
    """

    def __init__(self, search_space: Sequence[str], seed: int = 0, mode: str = 'uniform', min_full: int = 0,
                 max_full: Optional[int] = None) -> None:
        if mode not in SAMPLER_MODES:
            raise ValueError(f'unknown sampler mode {mode!r}; valid: {", ".join(SAMPLER_MODES)}')
        self.search_space = tuple(search_space)
        self.seed = int(seed)
        self.mode = mode
        self.full_layers = [i for i, options in enumerate(self.search_space) if 'F' in options]
        forced = [i for i, options in enumerate(self.search_space) if options == 'F']
        self.min_full = max(min_full, len(forced))
        self.max_full = len(self.full_layers) if max_full is None else max_full
        if mode == 'budgeted' and not self.min_full <= self.max_full <= len(self.full_layers):
            raise ValueError(f'F budget [{self.min_full}, {self.max_full}] is impossible: {len(self.full_layers)} '
                             f'layers have an F candidate and {len(forced)} have only F')

    def sample(self, iteration: int) -> str:
        rng = random.Random(f'{self.seed}:{iteration}')
        if self.mode == 'uniform':
            return ''.join(rng.choice(options) for options in self.search_space)
        num_full = rng.randint(self.min_full, self.max_full)
        forced = [i for i in self.full_layers if self.search_space[i] == 'F']
        optional = [i for i in self.full_layers if i not in forced]
        full = set(forced) | set(rng.sample(optional, num_full - len(forced)))
        return ''.join('F' if i in full else rng.choice(options.replace('F', ''))
                       for i, options in enumerate(self.search_space))
