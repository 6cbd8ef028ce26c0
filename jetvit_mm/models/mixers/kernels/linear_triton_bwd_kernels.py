"""Triton kernels of the L core's backward (imported only by :mod:`.linear_triton_bwd`, never at package import).

The core per image and head (ReLU features, RoPE in the numerator only): ``phi = relu``, ``z = sum_j phi(k_j)``,
``S = sum_j R_j phi(k_j) v_j^T``, ``o_i = R_i phi(q_i) S / den_i`` with ``den_i = phi(q_i) . z + eps``. With
``g_i`` the output's gradient and ``s_i = g_i / den_i``:

- ``d(R phi(q_i)) = s_i S^T``, ``d den_i = -s_i . o_i``, so ``d phi(q_i) = R_i^T s_i S^T + d den_i z``;
- ``dS = sum_i R_i phi(q_i) s_i^T`` and ``dz = sum_i d den_i phi(q_i)`` (partial sums per token split);
- ``d(R phi(k_j)) = v_j dS^T``, so ``d phi(k_j) = R_j^T v_j dS^T + dz`` and ``dv_j = dS^T R_j phi(k_j)``;
- ReLU passes the gradient where the input is > 0 (as torch's ``relu`` does).

``R_i^T`` of a rotation ``y_c = x_c cos_c + x_{p(c)} sin'_c`` (``p`` swaps a feature with its partner) is
``dx_c = dy_c cos_c + dy_{p(c)} sin'_{p(c)}``: the partner's column of ``s_i S^T`` is a second small matmul against
``S`` with its rows in partner order, so no rotated copy is ever written.

Three passes: ``_state`` (K and V: ``S``, ``z``, recomputed rather than kept from the forward), ``_q_grad`` (Q and
the output's gradient: ``dq``, partial ``dS``, ``dz``), ``_kv_grad`` (K and V: ``dk``, ``dv``). ``F64`` runs every
load and sum in float64 (``gradcheck`` on tiny shapes); otherwise elementwise work is fp32 and the matmuls take
bf16 operands for bf16 inputs, as in the forward kernels (``EMULATE``: see :mod:`.linear_triton_kernels`).
"""
import triton
import triton.language as tl

from .linear_triton_kernels import _matmul


@triton.jit
def _mm(a, b, BF16: tl.constexpr, EMULATE: tl.constexpr, F64: tl.constexpr):
    """a @ b: float64 throughout with ``F64``, else as the forward kernels' matmul."""
    if F64:
        out = tl.dot(a, b, out_dtype=tl.float64)
    else:
        out = _matmul(a, b, BF16, EMULATE)
    return out


@triton.jit
def _partner(cols, HEAD_DIM: tl.constexpr, ROTATE_HALF: tl.constexpr):
    if ROTATE_HALF:
        partner = (cols + HEAD_DIM // 2) % HEAD_DIM
    else:
        partner = cols ^ 1
    return partner


@triton.jit
def _rotated(x_ptr, phi, table, rows, cols, ok, HEAD_DIM: tl.constexpr, ROTATE_HALF: tl.constexpr,
             ACC: tl.constexpr):
    """``R phi`` for the rows ``rows`` of the features at ``x_ptr`` (``phi`` their ReLU)."""
    partner = _partner(cols, HEAD_DIM, ROTATE_HALF)
    mate = tl.where(ok, tl.maximum(tl.load(x_ptr + partner[None, :], mask=ok, other=0.0).to(ACC), 0.0), 0.0)
    t_ptr = table + rows[:, None] * (2 * HEAD_DIM) + cols[None, :]
    return phi * tl.load(t_ptr + HEAD_DIM, mask=ok, other=0.0).to(ACC) + mate * tl.load(t_ptr, mask=ok,
                                                                                         other=0.0).to(ACC)


@triton.jit
def _unrotated(dy, y_grad_mate, table, rows, cols, ok, HEAD_DIM: tl.constexpr, ROTATE_HALF: tl.constexpr,
               ACC: tl.constexpr):
    """``R^T dy``: ``dy * cos + dy[partner] * sin'[partner]`` (``y_grad_mate`` is ``dy`` in partner order)."""
    partner = _partner(cols, HEAD_DIM, ROTATE_HALF)
    t_ptr = table + rows[:, None] * (2 * HEAD_DIM)
    cos = tl.load(t_ptr + HEAD_DIM + cols[None, :], mask=ok, other=0.0).to(ACC)
    sin_mate = tl.load(t_ptr + partner[None, :], mask=ok, other=0.0).to(ACC)
    return dy * cos + y_grad_mate * sin_mate


@triton.jit
def _state(qkv, table, state, z_sum, N, D, stride_b, stride_n,
           HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
           TILES: tl.constexpr, HAS_ROPE: tl.constexpr, ROTATE_HALF: tl.constexpr, BF16: tl.constexpr,
           EMULATE: tl.constexpr, F64: tl.constexpr, ACC: tl.constexpr):
    bh = tl.program_id(0)
    split = tl.program_id(1)
    b = (bh // HEADS).to(tl.int64)  # 64-bit: b * stride_b passes 2**31 at batch >= 114 (ViT-B, 1024x2048)
    h = bh % HEADS
    cols = tl.arange(0, BLOCK_D)
    acc = tl.zeros([BLOCK_D, BLOCK_D], dtype=ACC)
    z_acc = tl.zeros([BLOCK_D], dtype=ACC)
    for t in range(TILES):
        rows = (split * TILES + t) * BLOCK_N + tl.arange(0, BLOCK_N)
        ok = (rows < N)[:, None] & (cols < HEAD_DIM)[None, :]
        k_ptr = qkv + b * stride_b + rows[:, None] * stride_n + D + h * HEAD_DIM
        phi = tl.where(ok, tl.maximum(tl.load(k_ptr + cols[None, :], mask=ok, other=0.0).to(ACC), 0.0), 0.0)
        v = tl.load(k_ptr + D + cols[None, :], mask=ok, other=0.0).to(ACC)
        z_acc += tl.sum(phi, axis=0)
        if HAS_ROPE:
            phi = _rotated(k_ptr, phi, table, rows, cols, ok, HEAD_DIM, ROTATE_HALF, ACC)
        acc += _mm(tl.trans(phi), v, BF16, EMULATE, F64)
    out = (bh * tl.num_programs(1) + split) * BLOCK_D
    tl.store(state + (out + cols[:, None]) * BLOCK_D + cols[None, :], acc)
    tl.store(z_sum + out + cols, z_acc)


@triton.jit
def _q_grad(qkv, table, state, z_sum, grad, dqkv, d_state, d_z, N, D, stride_b, stride_n, stride_gb, stride_gn,
            stride_db, stride_dn, eps,
            HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
            TILES: tl.constexpr, HAS_ROPE: tl.constexpr, ROTATE_HALF: tl.constexpr, BF16: tl.constexpr,
            EMULATE: tl.constexpr, F64: tl.constexpr, ACC: tl.constexpr):
    bh = tl.program_id(0)
    split = tl.program_id(1)
    b = (bh // HEADS).to(tl.int64)  # 64-bit: b * stride_b passes 2**31 at batch >= 114 (ViT-B, 1024x2048)
    h = bh % HEADS
    cols = tl.arange(0, BLOCK_D)
    s_ptr = state + bh * BLOCK_D * BLOCK_D
    s = tl.load(s_ptr + cols[:, None] * BLOCK_D + cols[None, :])
    s_mates = tl.load(s_ptr + _partner(cols, HEAD_DIM, ROTATE_HALF)[:, None] * BLOCK_D + cols[None, :])
    z = tl.load(z_sum + bh * BLOCK_D + cols)
    ds_acc = tl.zeros([BLOCK_D, BLOCK_D], dtype=ACC)
    dz_acc = tl.zeros([BLOCK_D], dtype=ACC)
    for t in range(TILES):
        rows = (split * TILES + t) * BLOCK_N + tl.arange(0, BLOCK_N)
        ok = (rows < N)[:, None] & (cols < HEAD_DIM)[None, :]
        q_ptr = qkv + b * stride_b + rows[:, None] * stride_n + h * HEAD_DIM
        q = tl.load(q_ptr + cols[None, :], mask=ok, other=0.0).to(ACC)
        phi = tl.where(ok, tl.maximum(q, 0.0), 0.0)
        den = tl.sum(phi * z[None, :], axis=1) + eps
        rotated = phi
        if HAS_ROPE:
            rotated = _rotated(q_ptr, phi, table, rows, cols, ok, HEAD_DIM, ROTATE_HALF, ACC)
        g = tl.load(grad + b * stride_gb + rows[:, None] * stride_gn + h * HEAD_DIM + cols[None, :], mask=ok,
                    other=0.0).to(ACC)
        scaled = g / den[:, None]
        out = _mm(rotated, s, BF16, EMULATE, F64) / den[:, None]
        d_den = -tl.sum(scaled * out, axis=1)
        d_phi = _mm(scaled, tl.trans(s), BF16, EMULATE, F64)
        if HAS_ROPE:
            d_mates = _mm(scaled, tl.trans(s_mates), BF16, EMULATE, F64)
            d_phi = _unrotated(d_phi, d_mates, table, rows, cols, ok, HEAD_DIM, ROTATE_HALF, ACC)
        d_phi += d_den[:, None] * z[None, :]
        dq = tl.where(ok & (q > 0), d_phi, 0.0)
        tl.store(dqkv + b * stride_db + rows[:, None] * stride_dn + h * HEAD_DIM + cols[None, :],
                 dq.to(dqkv.dtype.element_ty), mask=ok)
        ds_acc += _mm(tl.trans(rotated), scaled, BF16, EMULATE, F64)
        dz_acc += tl.sum(d_den[:, None] * phi, axis=0)
    out = (bh * tl.num_programs(1) + split) * BLOCK_D
    tl.store(d_state + (out + cols[:, None]) * BLOCK_D + cols[None, :], ds_acc)
    tl.store(d_z + out + cols, dz_acc)


@triton.jit
def _kv_grad(qkv, table, d_state, d_z, dqkv, N, D, stride_b, stride_n, stride_db, stride_dn,
             HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
             HAS_ROPE: tl.constexpr, ROTATE_HALF: tl.constexpr, BF16: tl.constexpr, EMULATE: tl.constexpr,
             F64: tl.constexpr, ACC: tl.constexpr):
    bh = tl.program_id(0)
    b = (bh // HEADS).to(tl.int64)  # 64-bit: b * stride_b passes 2**31 at batch >= 114 (ViT-B, 1024x2048)
    h = bh % HEADS
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_D)
    ok = (rows < N)[:, None] & (cols < HEAD_DIM)[None, :]
    ds_ptr = d_state + bh * BLOCK_D * BLOCK_D
    ds = tl.load(ds_ptr + cols[:, None] * BLOCK_D + cols[None, :])
    dz = tl.load(d_z + bh * BLOCK_D + cols)
    k_ptr = qkv + b * stride_b + rows[:, None] * stride_n + D + h * HEAD_DIM
    k = tl.load(k_ptr + cols[None, :], mask=ok, other=0.0).to(ACC)
    v = tl.load(k_ptr + D + cols[None, :], mask=ok, other=0.0).to(ACC)
    phi = tl.where(ok, tl.maximum(k, 0.0), 0.0)
    rotated = phi
    d_phi = _mm(v, tl.trans(ds), BF16, EMULATE, F64)
    if HAS_ROPE:
        rotated = _rotated(k_ptr, phi, table, rows, cols, ok, HEAD_DIM, ROTATE_HALF, ACC)
        ds_mates = tl.load(ds_ptr + _partner(cols, HEAD_DIM, ROTATE_HALF)[:, None] * BLOCK_D + cols[None, :])
        d_phi = _unrotated(d_phi, _mm(v, tl.trans(ds_mates), BF16, EMULATE, F64), table, rows, cols, ok, HEAD_DIM,
                           ROTATE_HALF, ACC)
    dk = tl.where(ok & (k > 0), d_phi + dz[None, :], 0.0)
    dv = _mm(rotated, ds, BF16, EMULATE, F64)
    d_ptr = dqkv + b * stride_db + rows[:, None] * stride_dn + D + h * HEAD_DIM + cols[None, :]
    tl.store(d_ptr, dk.to(dqkv.dtype.element_ty), mask=ok)
    tl.store(d_ptr + D, dv.to(dqkv.dtype.element_ty), mask=ok)
