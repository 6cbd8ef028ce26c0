"""What every token mixer shares: the teacher attention's projections and the token layout."""
import torch
from torch import nn


class TokenMixer(nn.Module):
    """Owns ``qkv`` (D -> 3D) and ``proj`` (D -> D) under the teacher attention's names, so that every teacher
    attention weight loads into any mixer; subclasses add their token mixing (and, for L, a conv on V)."""

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
        """q, k, v as ``[B, heads, N, head_dim]``."""
        B, N, _ = x.shape
        return self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
