"""Pooled key/value attention: the spatial-reduction attention of PVTv2 (Wang et al., 2022), built on the
teacher's own q/k/v/o.

Every query attends to the prefix tokens and to the patch grid average-pooled by ``pool_size`` (an s x s window
per key), so a layer costs ``N * (prefix + N / s^2)`` instead of ``N^2``. PVTv2 reduces x before its K/V
projection with a new strided conv; here the teacher's K/V projection is kept and its outputs are average-pooled,
which for s x s average pooling is the same as pooling x first (the projection is affine) and needs no new
parameter: the mixer inherits ``qkv``/``proj`` and nothing else. RoPE rotates q and the full-resolution k before
the pooling, so a pooled key is the mean of its window's rotated keys. ``pool_size=1`` is full attention.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from jetvit_mm.models.mixers import TokenMixer, register_mixer
from jetvit_mm.models.mixers.rope import check_num_tokens, rotate_query_key

__all__ = ['PooledAttention', 'pooled_attention_reference', 'pooling_matrix']


def _pool_patches(t: torch.Tensor, num_prefix_tokens: int, grid_size: Tuple[int, int], pool_size: int) -> torch.Tensor:
    """``[B, H, prefix + h*w, d]`` -> ``[B, H, prefix + ceil(h/s)*ceil(w/s), d]``: patches average-pooled in s x s
    windows (edge windows average the patches they hold), prefix tokens kept."""
    if pool_size == 1:
        return t
    B, H, _, d = t.shape
    h, w = grid_size
    prefix, patches = t[:, :, :num_prefix_tokens], t[:, :, num_prefix_tokens:]
    grid = patches.transpose(-1, -2).reshape(B * H, d, h, w)
    pooled = F.avg_pool2d(grid, pool_size, stride=pool_size, ceil_mode=True, count_include_pad=False)
    return torch.cat([prefix, pooled.reshape(B, H, d, -1).transpose(-1, -2)], dim=2)


@register_mixer
class PooledAttention(TokenMixer):
    """Softmax attention over the prefix tokens and s x s average-pooled patch keys/values (PVTv2-style spatial
    reduction, no new parameters).

    Args (beyond the mixer contract's common ones):
        pool_size: the side s of each pooling window, in patches (>= 1; 1 is full attention).
    """

    inherits = 'qkv_proj'

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True, proj_bias: bool = True,
                 num_prefix_tokens: int = 1, rotate_half: bool = True, attn_drop: float = 0., proj_drop: float = 0.,
                 pool_size: int = 2) -> None:
        super().__init__(dim, num_heads, qkv_bias, proj_bias, num_prefix_tokens, rotate_half, proj_drop)
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 1:
            raise ValueError(f'PooledAttention: pool_size must be an int >= 1, got {pool_size!r}')
        self.pool_size = pool_size
        self.attn_drop = nn.Dropout(attn_drop)

    def forward(self, x: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor] = None) -> torch.Tensor:
        B, N, D = x.shape
        check_num_tokens(N, self.num_prefix_tokens, grid_size)
        q, k, v = self.heads(x)
        if rope is not None:
            q, k = rotate_query_key(q, k, rope, self.num_prefix_tokens, self.rotate_half)
        k = _pool_patches(k, self.num_prefix_tokens, grid_size, self.pool_size)
        v = _pool_patches(v, self.num_prefix_tokens, grid_size, self.pool_size)
        x = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop.p if self.training else 0.)
        return self.proj_drop(self.proj(x.transpose(1, 2).reshape(B, N, D)))

    def attention_flops(self, batch: int, num_tokens: int, grid_size: Tuple[int, int]) -> int:
        """q k^T and attn v against the pooled keys: ``4 * B * N * M * D`` multiply-adds counted as 2 FLOPs."""
        h, w = grid_size
        keys = self.num_prefix_tokens + -(-h // self.pool_size) * -(-w // self.pool_size)
        return 2 * 2 * batch * num_tokens * keys * self.num_heads * self.head_dim


def pooling_matrix(num_prefix_tokens: int, grid_size: Tuple[int, int], pool_size: int) -> torch.Tensor:
    """The ``[M, N]`` matrix that maps all tokens to the pooled keys: identity on the prefix, 1/|window| on each
    window's patches (the quadratic reference's pooling)."""
    h, w = grid_size
    ph, pw = -(-h // pool_size), -(-w // pool_size)
    P = torch.zeros(num_prefix_tokens + ph * pw, num_prefix_tokens + h * w, dtype=torch.float64)
    P[:num_prefix_tokens, :num_prefix_tokens] = torch.eye(num_prefix_tokens)
    for i in range(h):
        for j in range(w):
            P[num_prefix_tokens + (i // pool_size) * pw + j // pool_size, num_prefix_tokens + i * w + j] = 1.
    return P / P.sum(dim=1, keepdim=True)


def pooled_attention_reference(mixer: PooledAttention, x: torch.Tensor, grid_size: Tuple[int, int],
                               rope: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The same attention computed the quadratic way, in float64: the full ``[N, N]`` logits against every key,
    pooled by :func:`pooling_matrix` (a pooled key's logit is the mean of its window's logits, its value the mean
    of the values)."""
    B, N, D = x.shape
    mixer64 = {name: p.double() for name, p in mixer.named_parameters()}
    qkv = F.linear(x.double(), mixer64['qkv.weight'], mixer64.get('qkv.bias'))
    q, k, v = qkv.reshape(B, N, 3, mixer.num_heads, mixer.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
    if rope is not None:
        q, k = rotate_query_key(q, k, rope.double(), mixer.num_prefix_tokens, mixer.rotate_half)
    P = pooling_matrix(mixer.num_prefix_tokens, grid_size, mixer.pool_size).to(x.device)
    logits = (q @ k.transpose(-1, -2)) @ P.T * mixer.head_dim ** -0.5  # [B, H, N, M]
    out = logits.softmax(-1) @ (P @ v)
    out = out.transpose(1, 2).reshape(B, N, D)
    return F.linear(out, mixer64['proj.weight'], mixer64.get('proj.bias'))
