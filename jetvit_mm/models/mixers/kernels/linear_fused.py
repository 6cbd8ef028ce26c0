"""The L core as one pure function of ``qkv``: what torch.compile fuses (CPU) and what the Triton kernels compute.

Same semantics as :meth:`LinearAttention.linear_attention` plus the conv term. Elementwise work and every sum are
fp32; the two matmuls take bf16 operands for bf16 inputs and fp32 ones otherwise. The division is applied to the
query rows before the second matmul (the same value, one rounding earlier in bf16), so that nothing but the
matmul's output and the conv term is read after it.
"""
import weakref
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F

from ...caching import plain_tensors
from ..rope import rope_table

_TABLES: Dict[Tuple, Tuple[weakref.ref, int, torch.Tensor]] = {}  # per RoPE embed: the layers of a forward share it


def rotation_table(rope: torch.Tensor, num_prefix_tokens: int, rotate_half: bool,
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[num_prefix_tokens + h * w, 2 * head_dim]`` table ``[sin', cos]`` for :func:`rotate` in ``dtype``: each
    feature's sin carries the sign its partner enters with; prefix rows are the identity. Outside torch.compile it is
    kept while ``rope`` (the model's cached embed) lives unchanged: every L layer at that grid reuses it."""
    if torch.compiler.is_compiling():
        return _rotation_table(rope, num_prefix_tokens, rotate_half).to(dtype)
    key = (id(rope), num_prefix_tokens, rotate_half, dtype)
    hit = _TABLES.get(key)
    version = -1 if rope.is_inference() else rope._version  # inference tensors keep no version counter
    if hit is not None and hit[0]() is rope and hit[1] == version:
        return hit[2]
    for k in [k for k, (ref, _, _) in _TABLES.items() if ref() is None]:
        del _TABLES[k]
    if len(_TABLES) >= 16:
        return _rotation_table(rope, num_prefix_tokens, rotate_half).to(dtype)
    with plain_tensors():  # a table first built under inference_mode still serves a later training step
        table = _rotation_table(rope, num_prefix_tokens, rotate_half).to(dtype)
    _TABLES[key] = (weakref.ref(rope), version, table)
    return table


def _rotation_table(rope: torch.Tensor, num_prefix_tokens: int, rotate_half: bool) -> torch.Tensor:
    table = rope_table(rope.float(), num_prefix_tokens, rotate_half)
    if rotate_half:  # rope_table already folds rotate-half's sign into sin
        return table
    sin, cos = table.chunk(2, dim=-1)  # interleaved pairs: rot(x)[2m] = -x[2m+1], rot(x)[2m+1] = x[2m]
    sign = torch.ones_like(sin[0]).view(-1, 2)
    sign[:, 0] = -1
    return torch.cat([sin * sign.flatten(), cos], dim=-1)


def _pairs(x: torch.Tensor, rotate_half: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """The two members of every RoPE pair: the halves (rotate-half) or even / odd features (interleaved)."""
    if rotate_half:
        return x.chunk(2, dim=-1)
    return x[..., 0::2], x[..., 1::2]


def rotated_pairs(x: torch.Tensor, table: torch.Tensor, rotate_half: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """RoPE with a :func:`rotation_table`, per pair member: ``(y1, y2)`` with ``y = x * cos + partners(x) * sin'``.
    Each member is computed from contiguous loads of ``x`` (a shuffled copy, or a roll, of ``x`` would be a
    gather in the compiled loop)."""
    sin, cos = table.chunk(2, dim=-1)
    (x1, x2), (s1, s2), (c1, c2) = _pairs(x, rotate_half), _pairs(sin, rotate_half), _pairs(cos, rotate_half)
    return x1 * c1 + x2 * s1, x2 * c2 + x1 * s2


def join_pairs(y1: torch.Tensor, y2: torch.Tensor, rotate_half: bool, dtype: torch.dtype) -> torch.Tensor:
    """The inverse of :func:`_pairs`, each member cast to ``dtype`` first (so no wider copy is ever written)."""
    y1, y2 = y1.to(dtype), y2.to(dtype)
    if rotate_half:
        return torch.cat([y1, y2], dim=-1)
    return torch.stack([y1, y2], dim=-1).flatten(-2)


def rotate(x: torch.Tensor, table: torch.Tensor, rotate_half: bool) -> torch.Tensor:
    """RoPE with a :func:`rotation_table`: ``x * cos + partners(x) * sin'``, as one elementwise expression (no
    concatenation: compiled, it fuses into whatever consumes it). The pair members are indexed as a dimension of 2
    (``flip`` swaps them), so that a compiled loop reads each member with contiguous vector loads."""
    sin, cos = table.chunk(2, dim=-1)
    pairs = (2, -1) if rotate_half else (-1, 2)
    member = -2 if rotate_half else -1
    x, sin, cos = (t.unflatten(-1, pairs) for t in (x, sin, cos))
    return (x * cos + x.flip(member) * sin).flatten(-2)


def feature_map(x: torch.Tensor, focusing: Optional[float], eps: float) -> torch.Tensor:
    """phi in fp32: ReLU, or FLatten's focused ReLU (as :func:`~jetvit_mm.models.mixers.linear.focused_relu`)."""
    x = F.relu(x)
    if focusing is None:
        return x
    x = x + eps
    norm = x.norm(dim=-1, keepdim=True)
    x = (x / x.amax(dim=-1, keepdim=True)) ** focusing
    return x * (norm / x.norm(dim=-1, keepdim=True))


def operand_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of the fused paths' matmul operands for inputs of ``dtype``."""
    return torch.bfloat16 if dtype == torch.bfloat16 else torch.float32


def fused_linear_attention(qkv: torch.Tensor, table: Optional[torch.Tensor], conv: Optional[torch.Tensor],
                           num_heads: int, num_prefix_tokens: int, eps: float, focusing: Optional[float] = None,
                           rotate_half: bool = True) -> torch.Tensor:
    """``[B, N, D]`` (heads merged, before ``proj``, in ``qkv.dtype``) from ``qkv`` (``[B, N, 3 * D]``, the qkv
    Linear's output); ``table`` a :func:`rotation_table` or None (no RoPE in the numerator); ``conv`` the conv term
    ``[B, h * w, D]`` added to the patch tokens, or None."""
    B, N, D3 = qkv.shape
    D = D3 // 3
    operand = operand_dtype(qkv.dtype)
    with torch.autocast(device_type=qkv.device.type, enabled=False):
        q, k, v = qkv.view(B, N, 3, num_heads, D // num_heads).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = feature_map(q.float(), focusing, eps), feature_map(k.float(), focusing, eps)
        # 1 / (phi(q_i) . z + eps), z the sum of the un-rotated phi(k): folded into the rows of the query operand
        scale = 1 / ((q * k.sum(dim=2, keepdim=True)).sum(dim=-1, keepdim=True) + eps)  # [B, H, N, 1]
        if table is not None:
            k = join_pairs(*rotated_pairs(k, table, rotate_half), rotate_half, operand)
            q = join_pairs(*(y * scale for y in rotated_pairs(q, table, rotate_half)), rotate_half, operand)
        else:
            k, q = k.to(operand), (q * scale).to(operand)
        # head-major V: the matmul's fast layout (a strided view of qkv makes it copy V itself, more slowly)
        v = v.to(operand).clone(memory_format=torch.contiguous_format)
        out = (q @ (k.transpose(-2, -1) @ v)).transpose(1, 2).reshape(B, N, D)  # [B, N, D]
        if conv is not None:  # zero rows for the prefix tokens: one pass, no concatenation
            out = out.float() + F.pad(conv.float(), (0, 0, num_prefix_tokens, 0))
        return out.to(qkv.dtype)
