"""The token-mixer contract, and what the built-in mixers share (the teacher attention's projections).

A token mixer is one letter of an arch: any ``nn.Module`` class registered with
:func:`~jetvit_mm.models.mixers.register_mixer` that keeps this contract (checked when a model that declares it is
built, :mod:`~jetvit_mm.models.mixers.contract`):

1. **Construction**: ``cls(dim, num_heads, qkv_bias, proj_bias, num_prefix_tokens, rotate_half, attn_drop,
   proj_drop, **options)``, all by keyword: the eight common arguments from the teacher (``rotate_half``: its RoPE
   layout), ``options`` the letter's own from the ``mixers=`` table (``P=dict(type='PooledAttention', pool_size=2)``).
2. **Call**: ``mixer(x, grid_size, rope)``, ``x`` ``[B, N, D]`` (``num_prefix_tokens`` prefix tokens, then
   ``h * w`` patch tokens row-major), ``grid_size = (h, w)``, ``rope`` None or ``(h * w, 2 * head_dim)`` (see
   :mod:`~jetvit_mm.models.mixers.rope`); returns ``[B, N, D]``.
3. **Inherited teacher weights** (class attribute ``inherits``): ``'qkv_proj'``: the mixer owns
   ``qkv = nn.Linear(D, 3 D, bias=qkv_bias)`` and ``proj = nn.Linear(D, D, bias=proj_bias)``, into which the model
   copies the teacher's q/k/v/o (``inherit='mlp'`` re-initialises them); every other parameter is new and must start
   so that the inherited model is not disturbed. ``'none'``: all its parameters are new, from its own initialisation.
4. **Options**: every constructor option is part of the arch spec saved with the weights, except those the class
   lists in ``deployment_options`` (implementation or rounding switches: the same computation) and ``init_options``
   (how new parameters start). Options must be JSON values.
5. Optional: ``attention_flops(batch, num_tokens, grid_size) -> int``, the FLOPs of its token mixing beyond the
   Linears and convs (counted by hooks), for :mod:`jetvit_mm.benchmark.flops`.

:class:`TokenMixer` is a base that satisfies 3 (``'qkv_proj'``) for subclasses.
"""
from typing import Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..tracing import exporting

INHERITS = ('qkv_proj', 'none')
COMMON_ARGS = ('dim', 'num_heads', 'qkv_bias', 'proj_bias', 'num_prefix_tokens', 'rotate_half', 'attn_drop',
               'proj_drop')


class TokenMixer(nn.Module):
    """Owns ``qkv`` (D -> 3D) and ``proj`` (D -> D) under the teacher attention's names, so that every teacher
    attention weight loads into any mixer; subclasses add their token mixing (and, for L, a conv on V)."""

    inherits: str = 'qkv_proj'
    deployment_options: Tuple[str, ...] = ()
    init_options: Tuple[str, ...] = ()

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool, proj_bias: bool, num_prefix_tokens: int,
                 rotate_half: bool, proj_drop: float) -> None:
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError(f'dim ({dim}) must be divisible by num_heads ({num_heads})')
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.num_prefix_tokens = num_prefix_tokens
        self.rotate_half = rotate_half
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.proj_drop = nn.Dropout(proj_drop)

    def heads(self, x: torch.Tensor):
        """q, k, v as ``[B, heads, N, head_dim]``; under torch.export from :meth:`projections` (same values)."""
        B, N, _ = x.shape
        if exporting():
            return tuple(t.reshape(B, N, self.num_heads, self.head_dim).transpose(1, 2) for t in self.projections(x))
        return self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)

    def projections(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k and v of ``x`` (``[B, N, D]`` each), each from its third of the ``qkv`` weight: the form an export
        traces (the weight slices are constants of the graph, so no ``[B, N, 3 D]`` output is split and copied)."""
        D = x.shape[-1]
        weight, bias = self.qkv.weight, self.qkv.bias
        return tuple(F.linear(x, weight[i * D:(i + 1) * D], None if bias is None else bias[i * D:(i + 1) * D])
                     for i in range(3))
