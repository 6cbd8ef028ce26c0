"""The L core's Triton backward (issue #30 item 5), under Triton's interpreter on CPU tensors:

- ``gradcheck`` in float64 on tiny shapes: the backward kernels (run in float64) against finite differences of the
  core's float64 formula, written here (the forward Triton kernels compute in fp32 and cannot be gradchecked
  themselves; their outputs are checked by tests/test_equivalence_matrix.py and tests/test_fast_mixers.py);
- a mixer on ``kernel='triton'`` trains through the Triton autograd Function: the input's and every weight's
  gradient against the same mixer on the torch path (fp32 to 1e-5 relative; bf16 no further from the fp32 result
  than the torch path's own bf16 gradient plus one bf16 spacing at the gradient's scale: the bf16 qkv Linear's
  backward alone rounds the input's gradient by several spacings), the path resolved with grad 'triton', and the
  static and squeeze conv terms computed by the kernels in training too (their backward in torch ops), the
  token-dynamic one beforehand;
- a backward kernel that computes wrongly fails the self-check: a warning naming it, and the torch path trains.

The checks run in one fresh interpreter with ``TRITON_INTERPRET=1`` (as tests/test_equivalence_matrix.py explains).
"""
import warnings
from typing import Callable, Dict, Optional

import pytest
import torch

from jetvit_mm.models.mixers import LinearAttention
from jetvit_mm.models.mixers import linear as linear_module
from jetvit_mm.models.mixers.kernels.linear_fused import rotation_table
from jetvit_mm.process_state import reset_caches

from .interpreted import interpreted, report_cases

BF16_EPS = torch.finfo(torch.bfloat16).eps
GRID = (3, 5)


def core_float64(qkv: torch.Tensor, table: Optional[torch.Tensor], heads: int, eps: float,
                 rotate_half: bool) -> torch.Tensor:
    """The L core from its formula: ``R_i phi(q_i) (sum_j R_j phi(k_j) v_j^T) / (phi(q_i) . sum_j phi(k_j) + eps)``,
    ``R`` the rotation of a :func:`rotation_table` (``sin'`` with its partner's sign folded in)."""
    B, N, D3 = qkv.shape
    q, k, v = qkv.reshape(B, N, 3, heads, D3 // 3 // heads).permute(2, 0, 3, 1, 4)
    q, k = q.relu(), k.relu()
    den = q @ k.sum(dim=2, keepdim=True).transpose(-2, -1) + eps
    if table is not None:
        sin, cos = table.double().chunk(2, dim=-1)
        C = q.shape[-1]
        partner = (torch.arange(C) + C // 2) % C if rotate_half else torch.arange(C) ^ 1
        q, k = (x * cos + x[..., partner] * sin for x in (q, k))
    return ((q @ (k.transpose(-2, -1) @ v)) / den).transpose(1, 2).reshape(B, N, D3 // 3)


def gradcheck_case(layout: str, prefix: int) -> None:
    """``gradcheck`` (fast mode: random projections of the Jacobian) of the float64 backward kernels."""
    from jetvit_mm.models.mixers.kernels.linear_triton_bwd import linear_attention_backward

    heads, eps, rotate_half = 2, 1e-3, layout != 'interleaved'
    g = torch.Generator().manual_seed(0)
    table = None
    if layout != 'none':
        table = rotation_table(torch.randn(GRID[0] * GRID[1], 32, generator=g, dtype=torch.float64), prefix,
                               rotate_half)

    class Core(torch.autograd.Function):
        @staticmethod
        def forward(ctx, qkv):
            ctx.save_for_backward(qkv)
            return core_float64(qkv, table, heads, eps, rotate_half)

        @staticmethod
        def backward(ctx, grad):
            return linear_attention_backward(ctx.saved_tensors[0], table, grad, heads, eps, rotate_half)

    # qkv away from ReLU's kink (|x| >= 0.1), where finite differences are defined
    qkv = torch.randn(2, prefix + GRID[0] * GRID[1], 3 * heads * 16, generator=g, dtype=torch.float64)
    qkv = (qkv + 0.1 * qkv.sign()).requires_grad_()
    assert torch.autograd.gradcheck(Core.apply, (qkv,), eps=1e-6, atol=1e-6, rtol=1e-4, fast_mode=True)


def mixer_pair(dtype: torch.dtype, layout: str, prefix: int, conv: str):
    torch.manual_seed(0)
    reference = LinearAttention(32, 2, num_prefix_tokens=prefix, rotate_half=layout != 'interleaved', conv=conv,
                                kernel='torch')
    with torch.no_grad():
        for p in reference.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    fast = LinearAttention(32, 2, num_prefix_tokens=prefix, rotate_half=layout != 'interleaved', conv=conv,
                           kernel='triton')
    fast.load_state_dict(reference.state_dict())
    return reference.train(), fast.train()


def gradients(mixer, x: torch.Tensor, rope: Optional[torch.Tensor], out_grad: torch.Tensor) -> Dict[str, torch.Tensor]:
    leaf = x.detach().clone().requires_grad_()
    mixer.zero_grad(set_to_none=True)
    out = mixer(leaf, GRID, rope)
    out.backward(out_grad.to(out.dtype))
    return dict(input=leaf.grad.float(), **{name: p.grad.float() for name, p in mixer.named_parameters()})


def rope_for(layout: str) -> Optional[torch.Tensor]:
    if layout == 'none':
        return None
    from timm.layers import RotaryEmbeddingDinoV3
    return RotaryEmbeddingDinoV3(16, temperature=100, rotate_half=layout == 'rotate_half').get_embed(shape=GRID)


def training_case(dtype_name: str, layout: str, prefix: int, conv: str) -> None:
    """Every gradient of the mixer on 'triton' against the torch path's (see the module docstring); the path
    resolved with grad is 'triton', and the static and squeeze conv terms are the kernels' (no eager conv runs)."""
    reference, fast = mixer_pair(torch.float32, layout, prefix, conv)
    if conv == 'squeeze':  # a generator that depends on V: its backward (and the mean's) is checked too
        with torch.no_grad():
            for mixer in (reference, fast):
                mixer.conv.fc2.weight.copy_(torch.randn(mixer.conv.fc2.weight.shape,
                                                        generator=torch.Generator().manual_seed(3)) * 0.2)
    x = torch.randn(3, prefix + GRID[0] * GRID[1], 32, generator=torch.Generator().manual_seed(1))
    out_grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(2)).bfloat16().float()
    rope = rope_for(layout)
    calls, eager_convs = [], []
    trainable = linear_module.trainable_triton_linear_attention
    linear_module.trainable_triton_linear_attention = lambda *a: calls.append(1) or trainable(*a)  # a spy
    conv_beforehand = fast.fast_value_conv  # the conv term computed before the kernels (the self-check's torch
    fast.fast_value_conv = lambda *a: eager_convs.append(1) or conv_beforehand(*a)  # path calls value_conv)
    try:
        exact = gradients(reference, x, rope, out_grad)
        if dtype_name == 'bf16':
            reference, fast, x = reference.bfloat16(), fast.bfloat16(), x.bfloat16()
        torch_path = gradients(reference, x, rope, out_grad) if dtype_name == 'bf16' else exact
        fast_path = gradients(fast, x, rope, out_grad)
    finally:
        linear_module.trainable_triton_linear_attention = trainable
    assert calls, 'the Triton autograd Function did not run'
    assert {path for key, path in fast._kernel_paths.items() if key[3]} == {'triton'}, fast._kernel_paths
    assert bool(eager_convs) == (conv == 'token'), f'{conv}: eager conv ran {len(eager_convs)} times'
    for name, ref in exact.items():
        scale = ref.abs().max().item()
        error = (fast_path[name] - ref).abs().max().item()
        if dtype_name == 'fp32':
            assert error <= 1e-5 * scale, (name, error, scale)
        else:
            torch_error = (torch_path[name] - ref).abs().max().item()
            assert error <= torch_error + BF16_EPS * scale, (name, error, torch_error)


def broken_backward_case() -> None:
    """A Triton backward that doubles every gradient: the self-check warns once, naming it, and the torch path's
    gradients come out."""
    reset_caches()
    from jetvit_mm.models.mixers.kernels.linear_triton import conv_arguments
    from jetvit_mm.models.mixers.kernels.linear_triton_bwd import TritonLinearAttention

    class Doubled(TritonLinearAttention):
        @staticmethod
        def backward(ctx, grad):
            return tuple(None if g is None else 2 * g for g in TritonLinearAttention.backward(ctx, grad))

    trainable = linear_module.trainable_triton_linear_attention
    def doubled(qkv, table, conv, heads, prefix, eps, rotate, conv_weights=None, grid_size=None):
        static, generator, grid = conv_arguments(conv, conv_weights, grid_size)
        return Doubled.apply(qkv, table, conv, heads, prefix, eps, rotate, *grid, static, *generator)

    linear_module.trainable_triton_linear_attention = doubled
    try:
        reference, fast = mixer_pair(torch.float32, 'rotate_half', 1, 'squeeze')
        x = torch.randn(2, 1 + GRID[0] * GRID[1], 32, generator=torch.Generator().manual_seed(1))
        out_grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(2))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            got = gradients(fast, x, rope_for('rotate_half'), out_grad)
            again = gradients(fast, x, rope_for('rotate_half'), out_grad)
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(messages) == 1 and "fast kernel 'triton backward' failed its self-check on cpu" in messages[0], \
            messages
        expected = gradients(reference, x, rope_for('rotate_half'), out_grad)
        assert all(torch.equal(got[n], expected[n]) and torch.equal(again[n], expected[n]) for n in expected)
    finally:
        linear_module.trainable_triton_linear_attention = trainable
        reset_caches()


CHECKS: Dict[str, Callable[[], None]] = {
    **{f'gradcheck-{layout}-p{prefix}': (lambda la=layout, pr=prefix: gradcheck_case(la, pr))
       for layout, prefix in (('rotate_half', 1), ('interleaved', 5), ('none', 0))},
    **{f'train-{d}-{layout}-p{prefix}-{conv}': (lambda *a: lambda: training_case(*a))(d, layout, prefix, conv)
       for d in ('fp32', 'bf16') for layout, prefix, conv in (('rotate_half', 5, 'squeeze'),
                                                              ('interleaved', 0, 'static'))},
    'train-fp32-none-p1-token': lambda: training_case('fp32', 'none', 1, 'token'),
    'broken-backward-falls-back': broken_backward_case,
}


@pytest.fixture(scope='module')
def interpreted_results() -> Dict[str, Optional[str]]:
    """Every check of ``CHECKS``, run in one fresh interpreter with ``TRITON_INTERPRET=1`` (``python -m
    tests.test_linear_triton_backward``): ``{name: None or the failure}``."""
    return interpreted('test_linear_triton_backward')


@pytest.mark.parametrize('name', list(CHECKS))
@pytest.mark.integration  # the Triton interpreter in its own process
def test_triton_backward_under_the_interpreter(interpreted_results, name):
    assert interpreted_results[name] is None, interpreted_results[name]


if __name__ == '__main__':  # the checks, run by ``interpreted_results`` under TRITON_INTERPRET=1
    report_cases(CHECKS)
