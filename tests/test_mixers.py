"""Token mixers: equivalence with the teacher / explicit quadratic references, init, robustness, lookup."""
from typing import Optional, Tuple

import pytest
import torch
import torch.nn.functional as F
from timm.layers import RotaryEmbeddingDinoV3, apply_rot_embed_cat
from timm.models.eva import EvaAttention
from timm.models.vision_transformer import Attention as TimmAttention

from jetvit_mm.models.mixers import (
    CONV_VARIANTS,
    MIXERS,
    FullAttention,
    LinearAttention,
    SqueezeDynamicConv,
    StaticDepthwiseConv,
    TokenDynamicConv,
    WindowAttention,
    build_mixer,
    default_mixers,
    get_mixer_cls,
    validate_arch,
)
from jetvit_mm.models.mixers.linear import focused_relu
from jetvit_mm.models.mixers.rope import apply_rope_table, rope_table

DIM, HEADS, PREFIX = 32, 2, 5
HEAD_DIM = DIM // HEADS

# (letter, mixer-specific kwargs, expected extra (non-teacher) parameter names)
GENERATOR_KEYS = {'conv.fc1.weight', 'conv.fc2.weight', 'conv.fc2.bias'}
MIXER_CASES = [
    ('F', {}, set()),
    ('W', {'window_size': 3}, set()),
    ('W', {'window_size': 16}, set()),
    ('L', {'conv': 'squeeze'}, GENERATOR_KEYS),
    ('L', {'conv': 'static'}, {'conv.weight'}),
    ('L', {'conv': 'token'}, GENERATOR_KEYS),
    ('L', {'conv': 'none'}, set()),
    ('L', {'conv': 'squeeze', 'focusing': 3.0}, GENERATOR_KEYS),
    ('L', {'conv': 'static', 'rope_numerator': False}, {'conv.weight'}),
    ('L', {'conv': 'squeeze', 'precision': 'mixed'}, GENERATOR_KEYS),
]
CASE_IDS = ['-'.join([letter] + [f'{k}={v}' for k, v in kw.items()]) for letter, kw, _ in MIXER_CASES]


def make_mixer(letter: str, kwargs: dict, num_prefix_tokens: int = PREFIX) -> torch.nn.Module:
    if letter == 'W':
        return build_mixer('W', DIM, HEADS, num_prefix_tokens=num_prefix_tokens, mixers=default_mixers(W=kwargs))
    if letter == 'L':
        return build_mixer('L', DIM, HEADS, num_prefix_tokens=num_prefix_tokens, mixers=default_mixers(L=kwargs))
    return build_mixer(letter, DIM, HEADS, num_prefix_tokens=num_prefix_tokens)


def dinov3_rope(grid_size: Tuple[int, int], head_dim: int = HEAD_DIM) -> torch.Tensor:
    return RotaryEmbeddingDinoV3(head_dim, temperature=100, rotate_half=True).get_embed(shape=grid_size)


def tokens(grid_size: Tuple[int, int], batch: int = 2, num_prefix_tokens: int = PREFIX, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, num_prefix_tokens + grid_size[0] * grid_size[1], DIM, generator=g)


def randomize_(module: torch.nn.Module, seed: int = 0) -> None:
    """Give every parameter (incl. zero-initialised biases) random non-trivial values."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)


# ----------------------------------------------------------------------------- independent reference pieces

def split_heads(x: torch.Tensor, mixer: torch.nn.Module) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    B, N, _ = x.shape
    qkv = F.linear(x, mixer.qkv.weight, mixer.qkv.bias).reshape(B, N, 3, HEADS, HEAD_DIM)
    return tuple(qkv[:, :, i].transpose(1, 2) for i in range(3))


def rotate_ref(x: torch.Tensor, rope: Optional[torch.Tensor], num_prefix_tokens: int) -> torch.Tensor:
    """Rotate-half RoPE written out by hand on the patch tokens of [B, H, N, C]."""
    if rope is None:
        return x
    sin, cos = rope.chunk(2, dim=-1)
    patches = x[:, :, num_prefix_tokens:]
    half = patches.shape[-1] // 2
    rotated = torch.cat([-patches[..., half:], patches[..., :half]], dim=-1)
    return torch.cat([x[:, :, :num_prefix_tokens], patches * cos + rotated * sin], dim=2)


def merge_and_project(out: torch.Tensor, mixer: torch.nn.Module) -> torch.Tensor:
    B, _, N, _ = out.shape
    return F.linear(out.transpose(1, 2).reshape(B, N, DIM), mixer.proj.weight, mixer.proj.bias)


def window_mask_ref(grid_size: Tuple[int, int], window: int, num_prefix_tokens: int) -> torch.Tensor:
    """[N, N] boolean mask: same-window patches, all prefix columns, prefix rows see everything."""
    h, w = grid_size
    rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing='ij')
    window_id = (rows // window * w + cols // window).flatten()
    n = num_prefix_tokens + h * w
    mask = torch.zeros(n, n, dtype=torch.bool)
    mask[num_prefix_tokens:, num_prefix_tokens:] = window_id[:, None] == window_id[None, :]
    mask[:, :num_prefix_tokens] = True
    mask[:num_prefix_tokens, :] = True
    return mask


def linear_attention_ref(
        x: torch.Tensor,
        mixer: LinearAttention,
        grid_size: Tuple[int, int],
        rope: Optional[torch.Tensor],
) -> torch.Tensor:
    """Quadratic form: explicit N x N normalised kernel matrix, times V, plus an independent depthwise conv."""
    P = mixer.num_prefix_tokens
    q, k, v = split_heads(x, mixer)
    phi_q, phi_k = mixer.feature_map(q), mixer.feature_map(k)
    denominator = (phi_q @ phi_k.transpose(-2, -1)).sum(dim=-1, keepdim=True)
    if rope is not None and mixer.rope_numerator:
        phi_q, phi_k = rotate_ref(phi_q, rope, P), rotate_ref(phi_k, rope, P)
    attn = (phi_q @ phi_k.transpose(-2, -1)) / (denominator + mixer.eps)
    out = attn @ v
    B, N, _ = x.shape
    out = out.transpose(1, 2).reshape(B, N, DIM)
    if mixer.conv is not None:
        assert isinstance(mixer.conv, StaticDepthwiseConv)
        h, w = grid_size
        v_grid = v[:, :, P:].transpose(1, 2).reshape(B, h, w, DIM).permute(0, 3, 1, 2)
        conv = F.conv2d(v_grid, mixer.conv.weight, padding=mixer.conv.kernel_size // 2, groups=DIM)
        out = torch.cat([out[:, :P], out[:, P:] + conv.flatten(2).transpose(1, 2)], dim=1)
    return F.linear(out, mixer.proj.weight, mixer.proj.bias)


# ----------------------------------------------------------------------------- full attention == teacher

def test_full_attention_matches_timm_eva_attention_with_rope():
    grid = (3, 4)
    eva = EvaAttention(DIM, HEADS, qkv_bias=True, num_prefix_tokens=PREFIX, rotate_half=True, scale_norm=False)
    randomize_(eva)
    full = FullAttention(DIM, HEADS, num_prefix_tokens=PREFIX)
    with torch.no_grad():
        full.qkv.weight.copy_(eva.qkv.weight)
        full.qkv.bias.copy_(torch.cat([eva.q_bias, torch.zeros_like(eva.q_bias), eva.v_bias]))
        full.proj.load_state_dict(eva.proj.state_dict())
    x, rope = tokens(grid), dinov3_rope(grid)
    expected = eva(x, rope=rope)
    torch.testing.assert_close(full(x, grid, rope), expected, rtol=0, atol=1e-6)
    # RoPE matters here: without it the outputs differ clearly
    assert (full(x, grid) - expected).abs().max() > 1e-3


@pytest.mark.parametrize('x_dtype,rope_dtype', [(torch.float32, torch.float32), (torch.bfloat16, torch.float32),
                                                 (torch.bfloat16, torch.bfloat16)], ids=['fp32', 'bf16-x', 'bf16'])
@pytest.mark.parametrize('num_prefix_tokens', [0, PREFIX])
def test_rope_table_gives_timm_rotation_bit_for_bit(x_dtype, rope_dtype, num_prefix_tokens):
    grid = (5, 7)
    x = torch.randn(2, HEADS, num_prefix_tokens + 35, HEAD_DIM, generator=torch.Generator().manual_seed(0))
    x, rope = (x * 10).to(x_dtype), dinov3_rope(grid).to(rope_dtype)
    patches = apply_rot_embed_cat(x[:, :, num_prefix_tokens:], rope, half=True)  # timm, patch tokens only
    # cast back: timm 1.0.31 does it itself, 1.0.29 (the GPU image's) returns the promoted dtype
    expected = torch.cat([x[:, :, :num_prefix_tokens], patches.to(x_dtype)], dim=2)
    out = apply_rope_table(x, rope_table(rope, num_prefix_tokens))
    assert out.dtype == x_dtype and torch.equal(out, expected)
    with pytest.raises(ValueError, match=r'rope table must have shape \(num_tokens, 2 \* head_dim\)'):
        apply_rope_table(x, rope_table(rope, num_prefix_tokens + 1))


def timm_1_0_29_rotation(x, emb, half=False):
    """timm 1.0.29's ``apply_rot_embed_cat`` (the GPU image's): the interleaved branch returns the promoted dtype
    (fp32 for bf16 ``x`` and an fp32 table) where newer timm casts back to ``x.dtype``."""
    return apply_rot_embed_cat(x, emb, half=half).to(torch.promote_types(x.dtype, emb.dtype))


@pytest.mark.parametrize('letter,options', [('F', {}), ('W', {'window_size': 3}), ('L', {'conv': 'squeeze'})])
def test_interleaved_rope_in_bf16_keeps_bf16_whatever_timm_returns(monkeypatch, letter, options):
    """Issue 39: W in bf16 with interleaved RoPE (EVA02 / RoPE-ViT teachers) crashed in SDPA ("Expected query, key,
    and value to have the same dtype") on timm 1.0.29; every mixer casts the rotation back itself."""
    from jetvit_mm.models.mixers import rope as rope_module

    grid = (5, 7)
    rope = RotaryEmbeddingDinoV3(HEAD_DIM, temperature=100, rotate_half=False).get_embed(shape=grid)
    mixers = default_mixers(**{letter: dict(options, kernel='torch')}) if letter != 'F' else None
    mixer = build_mixer(letter, DIM, HEADS, num_prefix_tokens=PREFIX, rotate_half=False, mixers=mixers)
    mixer = mixer.bfloat16().eval()
    x = tokens(grid).bfloat16()
    with torch.no_grad():
        expected = mixer(x, grid, rope)
        monkeypatch.setattr(rope_module, 'apply_rot_embed_cat', timm_1_0_29_rotation)
        out = mixer(x, grid, rope)
    assert out.dtype == torch.bfloat16 and torch.equal(out, expected)


def test_full_attention_matches_timm_vit_attention_without_rope():
    grid = (4, 4)
    teacher = TimmAttention(DIM, HEADS, qkv_bias=True)
    randomize_(teacher)
    full = FullAttention(DIM, HEADS, num_prefix_tokens=1)
    full.load_state_dict(teacher.state_dict(), strict=True)
    x = tokens(grid, num_prefix_tokens=1)
    torch.testing.assert_close(full(x, grid), teacher(x), rtol=0, atol=1e-6)


# ----------------------------------------------------------------------------- linear attention == quadratic form

@pytest.mark.parametrize('use_rope', [False, True], ids=['no_rope', 'rope'])
@pytest.mark.parametrize('conv', ['none', 'static'])
@pytest.mark.parametrize('focusing', [None, 3.0], ids=['relu', 'focused'])
def test_linear_attention_matches_quadratic_reference(use_rope, conv, focusing):
    grid = (3, 5)
    mixer = LinearAttention(DIM, HEADS, num_prefix_tokens=PREFIX, conv=conv, focusing=focusing)
    randomize_(mixer)
    x = tokens(grid)
    rope = dinov3_rope(grid) if use_rope else None
    expected = linear_attention_ref(x, mixer, grid, rope)
    torch.testing.assert_close(mixer(x, grid, rope), expected, rtol=1e-5, atol=1e-5)


def test_linear_attention_rope_is_used_in_numerator_only_and_can_be_switched_off():
    grid = (3, 5)
    x, rope = tokens(grid), dinov3_rope(grid)
    mixer = LinearAttention(DIM, HEADS, num_prefix_tokens=PREFIX, conv='none')
    randomize_(mixer)
    with_rope, without_rope = mixer(x, grid, rope), mixer(x, grid)
    assert (with_rope - without_rope).abs().max() > 1e-3
    # rotating the denominator as well is a different (wrong) model: the reference must tell them apart
    q, k, v = split_heads(x, mixer)
    phi_q, phi_k = rotate_ref(F.relu(q), rope, PREFIX), rotate_ref(F.relu(k), rope, PREFIX)
    kernel = phi_q @ phi_k.transpose(-2, -1)
    rotated_denominator = merge_and_project((kernel / (kernel.sum(-1, keepdim=True) + mixer.eps)) @ v, mixer)
    assert (with_rope - rotated_denominator).abs().max() > 1e-3
    mixer.rope_numerator = False
    assert torch.equal(mixer(x, grid, rope), without_rope)


def test_focused_relu_matches_flatten_formula_and_does_not_overflow():
    x = torch.randn(4, 7, 16) * 3
    y = F.relu(x) + 1e-6
    expected = y ** 3 / (y ** 3).norm(dim=-1, keepdim=True) * y.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(focused_relu(x, 3.0, 1e-6), expected, rtol=1e-5, atol=1e-7)
    huge = focused_relu(x * 1e14, 3.0, 1e-6)  # (1e14) ** 3 overflows fp32; the scale-free form does not
    assert torch.isfinite(huge).all()
    torch.testing.assert_close(huge.norm(dim=-1), (F.relu(x * 1e14) + 1e-6).norm(dim=-1), rtol=1e-5, atol=0)


def test_linear_attention_accumulates_in_fp32_for_bf16_inputs():
    grid = (8, 8)
    mixer = LinearAttention(DIM, HEADS, num_prefix_tokens=PREFIX, conv='none')
    randomize_(mixer)
    x = tokens(grid)
    expected = mixer(x, grid)
    out = mixer.to(torch.bfloat16)(x.to(torch.bfloat16), grid)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected, rtol=0.05, atol=0.05)


def test_linear_attention_mixed_precision_keeps_bf16_and_matches_fp32():
    grid = (8, 8)
    fp32 = LinearAttention(DIM, HEADS, num_prefix_tokens=PREFIX, conv='squeeze')
    randomize_(fp32)
    mixed = LinearAttention(DIM, HEADS, num_prefix_tokens=PREFIX, conv='squeeze', precision='mixed')
    mixed.load_state_dict(fp32.state_dict())
    x, rope = tokens(grid), dinov3_rope(grid)
    expected = fp32(x, grid, rope)
    assert torch.equal(mixed(x, grid, rope), expected)  # fp32 inputs: the same computation
    mixed.to(torch.bfloat16)
    q, k, v = split_heads(x.to(torch.bfloat16), mixed)
    assert mixed.linear_attention(q, k, v, rope).dtype == torch.bfloat16  # no fp32 copies of q, k, v
    assert fp32.to(torch.bfloat16).linear_attention(q, k, v, rope).dtype == torch.float32
    out = mixed(x.to(torch.bfloat16), grid, rope)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected, rtol=0.05, atol=0.05)
    assert mixed.compute_dtype(torch.float16) == torch.float32  # phi(q) z can exceed fp16's range
    with pytest.raises(ValueError, match="unknown precision 'bf16'; valid: 'fp32', 'mixed'"):
        LinearAttention(DIM, HEADS, precision='bf16')


def test_linear_attention_stays_fp32_under_autocast():
    grid = (4, 4)
    mixer = LinearAttention(DIM, HEADS, num_prefix_tokens=PREFIX, conv='none')
    randomize_(mixer)
    q, k, v = split_heads(tokens(grid), mixer)
    expected = mixer.linear_attention(q, k, v, dinov3_rope(grid))
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = mixer.linear_attention(q, k, v, dinov3_rope(grid))
        assert (q @ k.transpose(-2, -1)).dtype == torch.bfloat16  # autocast is really on
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- window attention == masked full

@pytest.mark.parametrize('grid,window', [((5, 7), 3), ((6, 6), 3), ((4, 9), 4), ((2, 3), 16)])
@pytest.mark.parametrize('use_rope', [False, True], ids=['no_rope', 'rope'])
@pytest.mark.parametrize('num_prefix_tokens', [0, 1, PREFIX])
def test_window_attention_matches_block_diagonal_masked_attention(grid, window, use_rope, num_prefix_tokens):
    mixer = WindowAttention(DIM, HEADS, num_prefix_tokens=num_prefix_tokens, window_size=window)
    randomize_(mixer)
    x = tokens(grid, num_prefix_tokens=num_prefix_tokens)
    rope = dinov3_rope(grid) if use_rope else None
    q, k, v = split_heads(x, mixer)
    q, k = rotate_ref(q, rope, num_prefix_tokens), rotate_ref(k, rope, num_prefix_tokens)
    mask = window_mask_ref(grid, window, num_prefix_tokens)
    expected = merge_and_project(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), mixer)
    torch.testing.assert_close(mixer(x, grid, rope), expected, rtol=1e-5, atol=1e-5)


def test_window_attention_uses_global_rope_positions():
    grid, window = (5, 7), 3
    mixer = WindowAttention(DIM, HEADS, num_prefix_tokens=PREFIX, window_size=window)
    randomize_(mixer)
    x, rope = tokens(grid), dinov3_rope(grid)
    out = mixer(x, grid, rope)

    # FullAttention's own rotation (global grid), restricted by the window mask, is what W computes
    full = FullAttention(DIM, HEADS, num_prefix_tokens=PREFIX)
    full.load_state_dict(mixer.state_dict())
    mask = window_mask_ref(grid, window, PREFIX)
    q, k, v = split_heads(x, full)
    q, k = rotate_ref(q, rope, PREFIX), rotate_ref(k, rope, PREFIX)
    torch.testing.assert_close(
        out, merge_and_project(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), full), rtol=1e-5, atol=1e-5)

    # a window covering the grid is exactly full attention with the same rope
    big = WindowAttention(DIM, HEADS, num_prefix_tokens=PREFIX, window_size=16)
    big.load_state_dict(mixer.state_dict())
    torch.testing.assert_close(big(x, grid, rope), full(x, grid, rope), rtol=1e-5, atol=1e-5)

    # negative control: positions recomputed per window (local coordinates) give a different output
    rows, cols = torch.meshgrid(torch.arange(grid[0]), torch.arange(grid[1]), indexing='ij')
    local_rope = torch.stack([
        dinov3_rope((window, window))[(r % window) * window + (c % window)]
        for r, c in zip(rows.flatten().tolist(), cols.flatten().tolist())
    ])
    assert (mixer(x, grid, local_rope) - out).abs().max() > 1e-3


# ----------------------------------------------------------------------------- conv variants at init

def test_squeeze_conv_equals_static_conv_at_init_exactly():
    torch.manual_seed(0)
    squeeze = SqueezeDynamicConv(DIM, kernel_size=3, reduction=8, kernel_init='trunc_normal')  # a non-zero kernel
    static = StaticDepthwiseConv(DIM, kernel_size=3)
    with torch.no_grad():
        static.weight.copy_(squeeze.static_kernel())
    v = torch.randn(3, DIM, 5, 7) * 10
    assert torch.equal(squeeze(v), static(v))
    assert static(v).abs().max() > 0
    # once the generator has moved, the kernels depend on the image
    with torch.no_grad():
        squeeze.fc2.weight.normal_()
    assert not torch.allclose(squeeze(v), static(v))


def test_squeeze_linear_mixer_equals_static_linear_mixer_at_init_exactly():
    grid = (4, 6)
    squeeze = LinearAttention(DIM, HEADS, num_prefix_tokens=PREFIX, conv='squeeze', kernel_init='trunc_normal')
    static = LinearAttention(DIM, HEADS, num_prefix_tokens=PREFIX, conv='static')
    static.load_state_dict({k: v for k, v in squeeze.state_dict().items() if not k.startswith('conv.')}, strict=False)
    with torch.no_grad():
        static.conv.weight.copy_(squeeze.conv.static_kernel())
    x, rope = tokens(grid), dinov3_rope(grid)
    assert torch.equal(squeeze(x, grid, rope), static(x, grid, rope))


def test_token_conv_equals_static_conv_at_init():
    torch.manual_seed(0)
    token = TokenDynamicConv(DIM, kernel_size=3, reduction=8, kernel_init='trunc_normal')
    static = StaticDepthwiseConv(DIM, kernel_size=3)
    with torch.no_grad():
        static.weight.copy_(token.fc2.bias.view(DIM, 1, 3, 3))
    v = torch.randn(2, DIM, 5, 7)
    torch.testing.assert_close(token(v), static(v), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('conv', ['squeeze', 'static', 'token'])
def test_default_conv_does_not_disturb_the_inherited_block_at_step_0(conv):
    """docs/method.md: new parts start neutral. The default zero kernel makes the L mixer exactly the conv-free one, and
    its gradient is non-zero, so the conv moves at the first step."""
    grid = (4, 6)
    torch.manual_seed(0)
    mixer = LinearAttention(DIM, HEADS, num_prefix_tokens=PREFIX, conv=conv)
    plain = LinearAttention(DIM, HEADS, num_prefix_tokens=PREFIX, conv='none')
    plain.load_state_dict({k: v for k, v in mixer.state_dict().items() if not k.startswith('conv.')})
    x, rope = tokens(grid), dinov3_rope(grid)
    out = mixer(x, grid, rope)
    assert torch.equal(out, plain(x, grid, rope))
    out.square().sum().backward()
    kernel = mixer.conv.weight if conv == 'static' else mixer.conv.fc2.bias
    assert kernel.grad.abs().max() > 0
    with pytest.raises(ValueError, match="unknown kernel_init 'dirac'; valid: 'zero', 'trunc_normal'"):
        LinearAttention(DIM, HEADS, conv=conv, kernel_init='dirac')


@pytest.mark.parametrize('conv_cls', [SqueezeDynamicConv, TokenDynamicConv])
def test_dynamic_generator_is_not_stuck_at_init(conv_cls):
    """The zero-initialised last Linear must receive a non-zero gradient, or the kernel never becomes dynamic."""
    torch.manual_seed(0)
    conv = conv_cls(DIM, kernel_size=3, reduction=8)
    v = torch.randn(2, DIM, 5, 7)
    (conv(v) * torch.randn(2, DIM, 5, 7)).sum().backward()  # a loss whose gradient is not zero at a zero output
    assert conv.fc2.weight.grad.abs().max() > 0
    assert conv.fc2.bias.grad.abs().max() > 0


def test_unknown_conv_variant_is_rejected():
    with pytest.raises(ValueError, match="'squeeze', 'static', 'token', 'none'"):
        LinearAttention(DIM, HEADS, conv='dynamic')
    assert CONV_VARIANTS == ('squeeze', 'static', 'token', 'none')


@pytest.mark.parametrize('letter', ['F', 'W', 'L'])
def test_bad_option_values_are_rejected_whatever_the_letter(letter):
    """A wrong L or W option fails when the model is built, not later when a search first reaches that letter."""
    common = dict(dim=DIM, num_heads=HEADS)
    for linear_cfg, match in ((dict(conv='sqeeze'), "unknown conv 'sqeeze'"), (dict(kernel_size=4), 'odd'),
                              (dict(reduction=0), 'reduction'), (dict(precision='fp8'), 'precision')):
        with pytest.raises(ValueError, match=match):
            build_mixer(letter, **common, mixers=default_mixers(L=linear_cfg))
    with pytest.raises(ValueError, match='window_size must be >= 1'):
        build_mixer(letter, **common, mixers=default_mixers(W=dict(window_size=0)))


# ----------------------------------------------------------------------------- every mixer and variant

@pytest.mark.parametrize('letter,kwargs,extra_keys', MIXER_CASES, ids=CASE_IDS)
@pytest.mark.parametrize('use_rope', [False, True], ids=['no_rope', 'rope'])
def test_mixer_shape_and_gradients(letter, kwargs, extra_keys, use_rope):
    grid = (5, 7)
    mixer = make_mixer(letter, kwargs)
    x = tokens(grid).requires_grad_()
    rope = dinov3_rope(grid) if use_rope else None
    out = mixer(x, grid, rope)
    assert out.shape == x.shape
    out.square().mean().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    for name, p in mixer.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize('letter,kwargs,extra_keys', MIXER_CASES, ids=CASE_IDS)
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16], ids=['fp32', 'bf16'])
def test_mixer_finite_on_large_grid_and_large_inputs(letter, kwargs, extra_keys, dtype):
    grid = (64, 128)
    mixer = make_mixer(letter, kwargs).to(dtype)
    x = (tokens(grid, batch=1) * 100).to(dtype)
    with torch.inference_mode():
        out = mixer(x, grid, dinov3_rope(grid))
    assert out.dtype == dtype and out.shape == x.shape
    assert torch.isfinite(out).all()


@pytest.mark.parametrize('letter,kwargs,extra_keys', MIXER_CASES, ids=CASE_IDS)
def test_teacher_attention_state_dict_loads(letter, kwargs, extra_keys):
    teacher = TimmAttention(DIM, HEADS, qkv_bias=True)
    mixer = make_mixer(letter, kwargs)
    result = mixer.load_state_dict(teacher.state_dict(), strict=False)
    assert result.unexpected_keys == []
    assert set(result.missing_keys) == extra_keys
    assert set(mixer.state_dict()) == set(teacher.state_dict()) | extra_keys
    for key, value in teacher.state_dict().items():
        assert torch.equal(mixer.state_dict()[key], value), key
    if not extra_keys:
        mixer.load_state_dict(teacher.state_dict(), strict=True)


@pytest.mark.parametrize('letter', sorted(MIXERS))
def test_mixer_rejects_wrong_token_count_and_rope_shape(letter):
    grid = (4, 5)
    mixer = build_mixer(letter, DIM, HEADS, num_prefix_tokens=PREFIX)
    with pytest.raises(ValueError, match=r'expected num_prefix_tokens \+ h \* w'):
        mixer(tokens(grid)[:, 1:], grid)
    with pytest.raises(ValueError, match='rope must have shape'):
        mixer(tokens(grid), grid, dinov3_rope((5, 4))[:-1])


def test_linear_attention_rejects_attn_drop():
    with pytest.raises(ValueError, match='attn_drop'):
        LinearAttention(DIM, HEADS, attn_drop=0.1)


# ----------------------------------------------------------------------------- lookup and arch strings

def test_get_mixer_cls():
    assert get_mixer_cls('F') is FullAttention
    assert get_mixer_cls('W') is WindowAttention
    assert get_mixer_cls('L') is LinearAttention
    for bad in ('X', 'l', '', 'LW'):
        with pytest.raises(ValueError, match=r"'F', 'L', 'W'") as info:
            get_mixer_cls(bad)
        assert repr(bad) in str(info.value)


def test_build_mixer_routes_specific_args():
    table = default_mixers(W=dict(window_size=5), L=dict(conv='static', kernel_size=5))
    w = build_mixer('W', DIM, HEADS, num_prefix_tokens=3, mixers=table)
    assert isinstance(w, WindowAttention) and w.window_size == 5 and w.num_prefix_tokens == 3
    lin = build_mixer('L', DIM, HEADS, mixers=table)
    assert isinstance(lin, LinearAttention) and isinstance(lin.conv, StaticDepthwiseConv)
    assert lin.conv.weight.shape == (DIM, 1, 5, 5)
    full = build_mixer('F', DIM, HEADS, qkv_bias=False, proj_bias=False)
    assert isinstance(full, FullAttention) and full.qkv.bias is None and full.proj.bias is None
    for letter in 'FWL':
        with pytest.raises(TypeError, match='convv'):
            build_mixer(letter, DIM, HEADS, mixers=default_mixers(L={'convv': 'static'}))
    with pytest.raises(TypeError, match='dim'):
        build_mixer('L', DIM, HEADS, mixers=default_mixers(L={'dim': 8}))


def test_validate_arch():
    assert validate_arch('LWLLWWLLWFLF', 12) == 'LWLLWWLLWFLF'
    assert validate_arch('FFF', None) == 'FFF'
    with pytest.raises(ValueError, match='3 letters.*expected.*4'):
        validate_arch('LWF', 4)
    with pytest.raises(ValueError, match=r"'X' at layer 1.*'l' at layer 3.*'F', 'L', 'W'"):
        validate_arch('LXFl', 4)
    with pytest.raises(ValueError, match='non-empty'):
        validate_arch('', None)
