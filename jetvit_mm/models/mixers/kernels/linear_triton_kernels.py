"""Triton kernels of the fused L forward (imported only by :mod:`.linear_triton`, never at package import).

Per image and head: ``_kv_state`` reads K and V once and accumulates ``S = sum_j R_j phi(k_j) v_j^T``,
``z = sum_j phi(k_j)`` and (for the squeeze conv) the sum of the patch tokens' V in fp32; each token split adds its
partial sums to one zeroed buffer with relaxed (unfenced) atomics (no reduction launch; the order of the splits' fp32
additions, and so the last bits, may vary between runs on a GPU). ``_q_output`` reads Q once and writes
``R_i phi(q_i) S / (phi(q_i) z + eps)`` plus the conv term, heads merged (a depthwise conv computed from V at the
``k * k`` shifted grid positions, or a conv term computed beforehand). With ``ROW_TILES`` a Q program holds one whole
grid row, so each shifted load reads one contiguous run. RoPE loads a feature's partner a second time from the same
cache lines: no rotated copy is ever written.

``EMULATE`` (set under TRITON_INTERPRET=1): the interpreter's numpy ``tl.dot`` has no bf16 and its fp32 -> bf16
cast truncates, so bf16 operands and outputs are rounded to the nearest bf16 value in fp32 arithmetic instead and
multiplied exactly in fp32: the same products and fp32 sums as a GPU's bf16 ``tl.dot``, up to summation order.
"""
import triton
import triton.language as tl


@triton.jit
def _feature(x, valid, FOCUS: tl.constexpr, power, eps):
    """phi of a [rows, BLOCK_D] tile (fp32): ReLU, or FLatten's focused ReLU; zero where not ``valid``."""
    x = tl.where(valid, tl.maximum(x, 0.0), 0.0)
    if FOCUS:
        x = tl.where(valid, x + eps, 0.0)
        norm = tl.sqrt(tl.sum(x * x, axis=1))
        top = tl.max(x, axis=1)
        top = tl.where(top > 0, top, 1.0)
        ratio = tl.where(valid, x / top[:, None], 1.0)
        y = tl.where(valid, tl.exp2(power * tl.log2(ratio)), 0.0)
        y_norm = tl.sqrt(tl.sum(y * y, axis=1))
        y_norm = tl.where(y_norm > 0, y_norm, 1.0)
        x = tl.where(valid, y * (norm / y_norm)[:, None], 0.0)
    return x


@triton.jit
def _round_bf16(x):
    """fp32 -> the nearest bf16 value (ties to even), kept in fp32."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _matmul(a, b, BF16: tl.constexpr, EMULATE: tl.constexpr):
    """a @ b with fp32 accumulation: bf16 operands, or exact fp32 ones."""
    if BF16:
        if EMULATE:
            out = tl.dot(_round_bf16(a), _round_bf16(b), input_precision='ieee')
        else:
            out = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    else:
        out = tl.dot(a, b, input_precision='ieee')
    return out


@triton.jit
def _kv_state(qkv, table, sums, N, D, P, stride_b, stride_n, power, eps,
              HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
              TILES: tl.constexpr, HAS_ROPE: tl.constexpr, ROTATE_HALF: tl.constexpr, FOCUS: tl.constexpr,
              V_SUM: tl.constexpr, BF16: tl.constexpr, EMULATE: tl.constexpr):
    bh = tl.program_id(0)
    split = tl.program_id(1)
    b = (bh // HEADS).to(tl.int64)  # 64-bit: b * stride_b passes 2**31 at batch >= 114 (ViT-B, 1024x2048)
    h = bh % HEADS
    cols = tl.arange(0, BLOCK_D)
    col_ok = cols < HEAD_DIM
    if ROTATE_HALF:
        partner = (cols + HEAD_DIM // 2) % HEAD_DIM
    else:
        partner = cols ^ 1
    acc = tl.zeros([BLOCK_D, BLOCK_D], dtype=tl.float32)
    z_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    v_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for t in range(TILES):
        rows = (split * TILES + t) * BLOCK_N + tl.arange(0, BLOCK_N)
        ok = (rows < N)[:, None] & col_ok[None, :]
        k_ptr = qkv + b * stride_b + rows[:, None] * stride_n + D + h * HEAD_DIM
        phi = _feature(tl.load(k_ptr + cols[None, :], mask=ok, other=0.0).to(tl.float32), ok, FOCUS, power, eps)
        v = tl.load(k_ptr + D + cols[None, :], mask=ok, other=0.0).to(tl.float32)
        z_acc += tl.sum(phi, axis=0)
        if V_SUM:  # the squeeze conv's mean of V: patch tokens only
            v_acc += tl.sum(tl.where((rows >= P)[:, None], v, 0.0), axis=0)
        if HAS_ROPE:
            mate = tl.load(k_ptr + partner[None, :], mask=ok, other=0.0).to(tl.float32)
            mate = _feature(mate, ok, FOCUS, power, eps)
            t_ptr = table + rows[:, None] * (2 * HEAD_DIM) + cols[None, :]
            sin = tl.load(t_ptr, mask=ok, other=0.0).to(tl.float32)
            cos = tl.load(t_ptr + HEAD_DIM, mask=ok, other=0.0).to(tl.float32)
            phi = phi * cos + mate * sin
        acc += _matmul(tl.trans(phi), v, BF16, EMULATE)
    base = sums + bh * BLOCK_D * (BLOCK_D + 2)  # per image and head: S, then z, then the sum of V
    # relaxed: nothing in this launch reads the sums, so the additions need no memory fence (the default acq_rel
    # fences every one of them); the Q pass, a later launch, sees them all
    tl.atomic_add(base + cols[:, None] * BLOCK_D + cols[None, :], acc, sem='relaxed')
    tl.atomic_add(base + BLOCK_D * BLOCK_D + cols, z_acc, sem='relaxed')
    if V_SUM:
        tl.atomic_add(base + BLOCK_D * (BLOCK_D + 1) + cols, v_acc, sem='relaxed')


@triton.jit
def _depthwise(qkv, kern, b, h, r, c, is_patch, cols, col_ok, D, P, GH, GW, stride_b, stride_n, stride_kb,
               HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, KSIZE: tl.constexpr):
    """The depthwise ``KSIZE x KSIZE`` conv of V (zero padding) at the patch tokens at grid rows ``r`` and columns
    ``c`` where ``is_patch``, head ``h``: fp32 ``[BLOCK_M, BLOCK_D]``, zero elsewhere."""
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    v_base = qkv + b * stride_b + 2 * D + h * HEAD_DIM + cols[None, :]
    k_base = kern + b * stride_kb + (h * HEAD_DIM + cols) * (KSIZE * KSIZE)
    for dy in tl.static_range(KSIZE):
        for dx in tl.static_range(KSIZE):
            rr = r + (dy - KSIZE // 2)
            cc = c + (dx - KSIZE // 2)
            there = is_patch & (rr >= 0) & (rr < GH) & (cc >= 0) & (cc < GW)
            v = tl.load(v_base + (P + rr * GW + cc)[:, None] * stride_n, mask=there[:, None] & col_ok[None, :],
                        other=0.0).to(tl.float32)
            weight = tl.load(k_base + dy * KSIZE + dx, mask=col_ok, other=0.0).to(tl.float32)
            acc += v * weight[None, :]
    return acc


@triton.jit
def _q_output(qkv, table, sums, conv, kern, out, N, D, P, GH, GW, stride_b, stride_n, stride_cb, stride_cn,
              stride_kb, stride_ob, stride_on, power, eps,
              HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
              HAS_ROPE: tl.constexpr, ROTATE_HALF: tl.constexpr, FOCUS: tl.constexpr, HAS_CONV: tl.constexpr,
              DEPTHWISE: tl.constexpr, KSIZE: tl.constexpr, ROW_TILES: tl.constexpr, BF16: tl.constexpr,
              EMULATE: tl.constexpr):
    bh = tl.program_id(0)
    b = (bh // HEADS).to(tl.int64)  # 64-bit: b * stride_b passes 2**31 at batch >= 114 (ViT-B, 1024x2048)
    h = bh % HEADS
    lane = tl.arange(0, BLOCK_M)
    if ROW_TILES:  # program 0: the prefix tokens (if any); then one program per grid row, its GW tokens in order
        tile = tl.program_id(1) - tl.where(P > 0, 1, 0)
        start = tl.where(tile < 0, 0, P + tile * GW)
        rows = start + lane
        in_tile = lane < tl.where(tile < 0, P, GW)
        r = tl.zeros([BLOCK_M], dtype=tl.int32) + tile  # the grid row and column, no division
        c = lane
        is_patch = in_tile & (tile >= 0)
    else:
        rows = tl.program_id(1) * BLOCK_M + lane
        in_tile = rows < N
        r = (rows - P) // GW
        c = (rows - P) % GW
        is_patch = in_tile & (rows >= P)
    cols = tl.arange(0, BLOCK_D)
    col_ok = cols < HEAD_DIM
    ok = in_tile[:, None] & col_ok[None, :]
    if ROTATE_HALF:
        partner = (cols + HEAD_DIM // 2) % HEAD_DIM
    else:
        partner = cols ^ 1
    q_ptr = qkv + b * stride_b + rows[:, None] * stride_n + h * HEAD_DIM
    phi = _feature(tl.load(q_ptr + cols[None, :], mask=ok, other=0.0).to(tl.float32), ok, FOCUS, power, eps)
    base = sums + bh * BLOCK_D * (BLOCK_D + 2)
    z = tl.load(base + BLOCK_D * BLOCK_D + cols)
    denominator = tl.sum(phi * z[None, :], axis=1)
    if HAS_ROPE:
        mate = _feature(tl.load(q_ptr + partner[None, :], mask=ok, other=0.0).to(tl.float32), ok, FOCUS, power, eps)
        t_ptr = table + rows[:, None] * (2 * HEAD_DIM) + cols[None, :]
        cos = tl.load(t_ptr + HEAD_DIM, mask=ok, other=0.0).to(tl.float32)
        phi = phi * cos + mate * tl.load(t_ptr, mask=ok, other=0.0).to(tl.float32)
    s = tl.load(base + cols[:, None] * BLOCK_D + cols[None, :])
    o = _matmul(phi, s, BF16, EMULATE) / (denominator[:, None] + eps)
    if HAS_CONV:
        patch = is_patch[:, None] & col_ok[None, :]
        c_ptr = conv + b * stride_cb + (rows - P)[:, None] * stride_cn + h * HEAD_DIM + cols[None, :]
        o += tl.load(c_ptr, mask=patch, other=0.0).to(tl.float32)
    if DEPTHWISE:
        o += _depthwise(qkv, kern, b, h, r, c, is_patch, cols, col_ok, D, P, GH, GW, stride_b, stride_n, stride_kb,
                        HEAD_DIM, BLOCK_D, BLOCK_M, KSIZE)
    if BF16 and EMULATE:
        o = _round_bf16(o)
    o_ptr = out + b * stride_ob + rows[:, None] * stride_on + h * HEAD_DIM + cols[None, :]
    tl.store(o_ptr, o.to(out.dtype.element_ty), mask=ok)


@triton.jit
def _generator(sums, fc1, fc2, bias, kern, inv_patches, D: tl.constexpr, HIDDEN, OUT,
               HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_IN: tl.constexpr,
               BLOCK_HID: tl.constexpr, BLOCK_OUT: tl.constexpr, OUT_TILES: tl.constexpr):
    """The squeeze conv's kernels of image ``program_id(0)``, ``OUT_TILES * BLOCK_OUT`` of them per program:
    ``fc2 silu(fc1 mean) + bias`` in fp32, the mean of V read from the K/V pass's sums (per head: S, z, sum of V).
    ``D`` is a compile-time constant: Triton 3.6's interpreter cannot loop over a range with a run-time bound."""
    b = tl.program_id(0)
    hid = tl.arange(0, BLOCK_HID)
    hid_ok = hid < HIDDEN
    acc = tl.zeros([BLOCK_HID], dtype=tl.float32)
    for start in range(0, D, BLOCK_IN):
        d = start + tl.arange(0, BLOCK_IN)
        d_ok = d < D
        v_sum = sums + (b * HEADS + d // HEAD_DIM) * (BLOCK_D * (BLOCK_D + 2)) + BLOCK_D * (BLOCK_D + 1) + d % HEAD_DIM
        mean = tl.load(v_sum, mask=d_ok, other=0.0) * inv_patches
        w1 = tl.load(fc1 + hid[:, None] * D + d[None, :], mask=hid_ok[:, None] & d_ok[None, :], other=0.0)
        acc += tl.sum(w1.to(tl.float32) * mean[None, :], axis=1)
    hidden = acc / (1.0 + tl.exp(-acc))  # SiLU
    for t in range(OUT_TILES):
        o = (tl.program_id(1) * OUT_TILES + t) * BLOCK_OUT + tl.arange(0, BLOCK_OUT)
        o_ok = o < OUT
        w2 = tl.load(fc2 + o[:, None] * HIDDEN + hid[None, :], mask=o_ok[:, None] & hid_ok[None, :], other=0.0)
        value = tl.sum(w2.to(tl.float32) * hidden[None, :], axis=1)
        tl.store(kern + b * OUT + o, value + tl.load(bias + o, mask=o_ok, other=0.0).to(tl.float32), mask=o_ok)
