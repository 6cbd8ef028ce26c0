"""Today's default models, as data: the cases of the bit-for-bit test (tests/test_defaults_unchanged.py).

``python -m tests.default_models tests/reference/default_models.pt`` writes each case's state dict keys (in
order), a digest of every tensor, the arch spec it saves and its outputs. The committed reference was computed with
main's code (commit 6985438) before the open search space (issue 23) changed the mixer code, so the test compares
the new code against the old one; it also keeps one tiny hybrid's state dict as main saved it (an old checkpoint).
The cases set their mixer options through ``mixers=`` (issue 31), as the code of that time did through the former
``window_size=`` / ``linear_cfg=`` arguments: the same models.
"""
import hashlib
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


def digest(tensor: torch.Tensor) -> str:
    t = tensor.detach().cpu().contiguous()
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes() if t.numel() else b'').hexdigest()[:32] + str(
        tuple(t.shape)) + str(t.dtype)


def run_case(name: str) -> Dict[str, object]:
    """Build case ``name`` under seed 0 and run it on a seeded input: keys, digests, saved spec, outputs."""
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
    return dict(keys=list(state), digests={k: digest(v) for k, v in state.items() if not k.endswith('_extra_state')},
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
