"""Today's default models, as data: the cases of the bit-for-bit test (tests/test_defaults_unchanged.py).

``python -m tests.default_models tests/reference/default_models.pt`` writes each case's state dict keys (in
order), a summary of every tensor (:func:`summary`), the arch spec it saves and its outputs. The outputs and specs
of the committed reference were computed with main's code (commit 6985438) before the open search space (issue 23)
changed the mixer code, so the test compares the new code against the old one; it also keeps one tiny hybrid's state
dict as main saved it (an old checkpoint).

The weights are compared by summary, with a tolerance, not bit for bit: a freshly initialised weight differs in its
last bits between CPUs (an AMD EPYC and an Intel Xeon with AMX gave other sha256 digests for 12 of 12 cases, from
the same code and seeds), so digests made the test pass on one CPU only. The summaries were recorded on 2026-12-04
on an AMD EPYC VM from main e8d25d0, whose weights matched the old digests bit for bit on the Intel VM.
The cases set their mixer options through ``mixers=`` (issue 31), as the code of that time did through the former
``window_size=`` / ``linear_cfg=`` arguments: the same models.
"""
import json
import sys
from typing import Callable, Dict, Tuple

import torch

from jetvit_mm.models.mixers import default_mixers

TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2)
TINY_V2 = dict(model_name='dinov2_vits14', embed_dim=32, depth=4, num_heads=2)


def _jetvit(**kwargs):
    from jetvit_mm.models import JetViT
    return JetViT(**kwargs)


def _supernet(arch=None, **kwargs):
    from jetvit_mm.models.supernet import JetViTSupernet
    model = JetViTSupernet(**kwargs)
    if arch is not None:
        model.set_arch(arch)
    return model


def _depth(**kwargs):
    from jetvit_mm.models import JetViTDepthAnything
    return JetViTDepthAnything(**kwargs)


def _w(window: int) -> dict:
    """The default mixer table with W windows of ``window`` patches (the former ``window_size=`` argument)."""
    return default_mixers(W=dict(window_size=window))


# name -> (builder, input shape)
CASES: Dict[str, Tuple[Callable[[], torch.nn.Module], Tuple[int, ...]]] = {
    'dinov3_hybrid': (lambda: _jetvit(arch='LWFL', mixers=_w(2), **TINY), (1, 3, 64, 96)),
    'dinov3_teacher_qkv_bias': (lambda: _jetvit(qkv_bias=True, **TINY), (1, 3, 48, 64)),
    'dinov2_hybrid': (lambda: _jetvit(arch='WLFL', mixers=_w(3), out_indices=(1, 3), **TINY_V2), (1, 3, 70, 98)),
    'linear_options': (lambda: _jetvit(arch='LLLW', mixers=default_mixers(L=dict(conv='static', focusing=3.0,
                                                                                 kernel_init='trunc_normal')), **TINY),
                       (1, 3, 64, 64)),
    'linear_token_conv': (lambda: _jetvit(arch='LFLF', mixers=default_mixers(L=dict(conv='token', kernel_size=5)),
                                          **TINY), (1, 3, 64, 80)),
    'inherit_mlp': (lambda: _jetvit(arch='LWFW', inherit='mlp', mixers=_w(2), **TINY), (1, 3, 64, 64)),
    'supernet_step1': (lambda: _supernet(arch='LWWL', search_space='LW', mixers=_w(2), **TINY), (1, 3, 64, 96)),
    'supernet_step1_default': (lambda: _supernet(mixers=_w(2), **TINY), (1, 3, 64, 64)),
    'supernet_step2': (lambda: _supernet(arch='FWWF', search_space=None, step1_arch='LWWL', **TINY), (1, 3, 64, 64)),
    'supernet_three': (lambda: _supernet(arch='FLWF', search_space='LWF', inherit='mlp', **TINY), (1, 3, 64, 64)),
    'old_checkpoint': (lambda: _jetvit(arch='LWF', mixers=_w(2), model_name='dinov3_vits16', embed_dim=16, depth=3,
                                       num_heads=2), (1, 3, 32, 48)),
    'depth_anything': (lambda: _depth(arch='LWFF', mixers=_w(2), out_indices=(0, 1, 2, 3), features=16,
                                      out_channels=[8, 16, 32, 32], **TINY_V2), (1, 3, 56, 84)),
}
OLD_CHECKPOINT_CASE = 'old_checkpoint'


SIGNS = 4  # signed sums per tensor


def summary(tensor: torch.Tensor) -> Dict[str, object]:
    """What a tensor is, up to rounding: its shape and dtype, and in float64 its sum, absolute sum, sum of squares
    and ``SIGNS`` sums with pseudo-random signs (integer hashes of the index, the same on every machine), which move
    when any value moves by more than rounding or when values trade places."""
    t = tensor.detach().cpu().reshape(-1).double()
    index = torch.arange(t.numel(), dtype=torch.int64)
    signs = [((index * (2654435761 + 2 * k) + k) >> 7 & 1).double() * 2 - 1 for k in range(SIGNS)]
    sums = [t.sum(), t.abs().sum(), t.square().sum()] + [(t * s).sum() for s in signs]
    return dict(shape=tuple(tensor.shape), dtype=str(tensor.dtype), sums=torch.stack(sums) if t.numel() else
                torch.zeros(3 + SIGNS, dtype=torch.float64))


def summaries_match(now: Dict[str, object], ref: Dict[str, object], rtol: float = 2e-6) -> bool:
    """True when two summaries are of the same tensor up to rounding: each sum within ``rtol`` of the absolute sum
    (the scale no sum can exceed), squares within ``rtol`` of their own. 2e-6 is five times the worst case of every
    value off by 4e-7 of itself (a few ulps: vectorised math differs by up to ~3.5 ulp between CPU builds)."""
    if now['shape'] != ref['shape'] or now['dtype'] != ref['dtype']:
        return False
    a, b = now['sums'], ref['sums']
    scale = torch.tensor([b[1]] * 3 + [b[1]] * SIGNS, dtype=torch.float64)
    scale[2] = b[2]
    return bool(((a - b).abs() <= rtol * scale + 1e-30).all())


def run_case(name: str) -> Dict[str, object]:
    """Build case ``name`` under seed 0 and run it on a seeded input: keys, tensor summaries, saved spec, outputs."""
    build, shape = CASES[name]
    torch.manual_seed(0)
    model = build().eval()
    state = model.state_dict()
    torch.manual_seed(1)
    x = torch.randn(*shape)
    with torch.no_grad():
        out = model(x)
    outputs = list(out) if isinstance(out, (tuple, list)) else [out]
    specs = {k: json.loads(bytes(v.tolist()).decode()) for k, v in state.items() if k.endswith('_extra_state')}
    return dict(keys=list(state), summaries={k: summary(v) for k, v in state.items() if not k.endswith('_extra_state')},
                specs=specs, outputs=[o.detach().clone() for o in outputs], state=state)


def main(path: str) -> None:
    reference = {'torch': str(torch.__version__), 'cpu_capability': torch.backends.cpu.get_cpu_capability(),
                 'cases': {}}
    for name in CASES:
        result = run_case(name)
        state = result.pop('state')
        if name == OLD_CHECKPOINT_CASE:
            reference['old_checkpoint'] = state
        reference['cases'][name] = result
    torch.save(reference, path)
    print(f'wrote {path}: {len(CASES)} cases')


if __name__ == '__main__':
    main(sys.argv[1])
