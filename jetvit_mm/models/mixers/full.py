"""Full (softmax) attention: the teacher's own attention, the 'F' mixer."""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .base import TokenMixer
from .rope import check_num_tokens, rotate_query_key


class FullAttention(TokenMixer):
    """Multi-head softmax attention over all tokens, numerically the teacher's attention.

    Same parameters as timm's ViT ``Attention`` (``qkv``, ``proj``); with ``rope`` it matches timm's
    ``EvaAttention`` (DINOv3): patch tokens rotated, prefix tokens not.
    """

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True, proj_bias: bool = True,
                 num_prefix_tokens: int = 1, rotate_half: bool = True, attn_drop: float = 0.,
                 proj_drop: float = 0.) -> None:
        super().__init__(dim, num_heads, qkv_bias, proj_bias, num_prefix_tokens, rotate_half, proj_drop)
        self.attn_drop = nn.Dropout(attn_drop)

    def forward(self, x: torch.Tensor, grid_size: Tuple[int, int], rope: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Mix ``x`` (``[B, N, D]``) with softmax attention; ``rope`` is ``(h * w, 2 * head_dim)`` or None."""
        B, N, D = x.shape
        check_num_tokens(N, self.num_prefix_tokens, grid_size)
        q, k, v = self.heads(x)
        if rope is not None:
            q, k = rotate_query_key(q, k, rope, self.num_prefix_tokens, self.rotate_half)
        x = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop.p if self.training else 0.)
        x = x.transpose(1, 2).reshape(B, N, D)
        return self.proj_drop(self.proj(x))
