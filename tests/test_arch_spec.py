"""The arch as one piece of data: every JetViT's state dict carries its ArchSpec and every load checks it, also
where only a state dict is loaded (torch, mmengine's load_checkpoint, mmseg's init_model); hybrids must hold their
L convs; a spec of another version is refused."""
import pytest
import torch
from safetensors.torch import save_file

from jetvit_mm.models import JetViT
from jetvit_mm.models.arch import SPEC_KEY, ArchSpec, check_spec
from jetvit_mm.models.checkpoint import apply_checkpoint
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.supernet import JetViTSupernet

from .conftest import REPO

TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2,
            mixers=default_mixers(W=dict(window_size=2)))
PROBE = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'


def with_options(**options) -> dict:
    """TINY with more options of its mixer table (W's window 2 unless given)."""
    options['W'] = {'window_size': 2, **options.get('W', {})}
    return dict(TINY, mixers=default_mixers(**options))


def test_spec_holds_model_arch_and_only_the_options_that_change_the_computation():
    model = JetViT(arch='LWLF', **with_options(L=dict(focusing=3.0, precision='mixed', kernel_init='trunc_normal')))
    spec = model.spec
    assert (spec.model_name, spec.arch, spec.search_space) == ('dinov3_vits16', 'LWLF', None)
    assert spec.mixers['W'] == {'type': 'WindowAttention', 'window_size': 2}
    assert spec.mixers['F'] == {'type': 'FullAttention'}
    assert spec.mixers['L']['type'] == 'LinearAttention'
    assert spec.mixers['L']['focusing'] == 3.0 and spec.mixers['L']['conv'] == 'squeeze'
    assert not {'precision', 'kernel_init', 'kernel'} & set(spec.mixers['L'])  # deployment switches
    assert ArchSpec.from_tensor(spec.to_tensor()) == spec == ArchSpec.from_dict(spec.to_dict())
    assert ArchSpec.from_tensor(model.state_dict()[SPEC_KEY]) == spec
    assert set(JetViT(arch='FFFF', **TINY).spec.mixers) == {'F'}  # only the letters the arch uses
    with pytest.raises(ValueError, match='not a JetViT arch spec'):
        ArchSpec.from_tensor(torch.tensor(list(b'{"arch": "LF"}'), dtype=torch.uint8))
    with pytest.raises(ValueError, match='1-D uint8 tensor'):
        ArchSpec.from_tensor(torch.zeros(3))
    with pytest.raises(ValueError, match='either an arch'):
        ArchSpec('dinov3_vits16')


def test_every_load_refuses_another_arch_or_option(tmp_path):
    source = JetViT(arch='LWLF', **TINY)
    state = source.state_dict()
    # torch's own load_state_dict, a plain file, a safetensors file: the spec travels with the weights
    torch.save(state, tmp_path / 'plain.pth')
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / 'weights.safetensors'))
    for load in (lambda m: m.load_state_dict(state), lambda m: m.load_checkpoint(tmp_path / 'plain.pth'),
                 lambda m: m.load_checkpoint(tmp_path / 'weights.safetensors')):
        with pytest.raises(ValueError, match="holds a JetViT with arch 'LWLF', but this model has arch 'LFLW'"):
            load(JetViT(arch='LFLW', **TINY))
        with pytest.raises(ValueError, match='built with mixers.W.window_size=2, but this model has '
                                             'mixers.W.window_size=4'):
            load(JetViT(arch='LWLF', **with_options(W=dict(window_size=4))))
        with pytest.raises(ValueError, match="mixers.L.conv='squeeze', but this model has mixers.L.conv='static'"):
            load(JetViT(arch='LWLF', **with_options(L=dict(conv='static'))))
        load(JetViT(arch='LWLF', **with_options(L=dict(precision='mixed'))))  # a deployment switch: same weights
    # a teacher (all F) loads into every arch, a supernet path into none
    JetViT(arch='LWLF', **TINY).load_state_dict(JetViT(arch='FFFF', **TINY).state_dict(), strict=False)
    supernet = JetViTSupernet(search_space='LW', **TINY)
    with pytest.raises(ValueError, match='is a supernet checkpoint'):
        JetViT(arch='LWLW', **TINY).load_state_dict(supernet.state_dict(), strict=False)
    with pytest.raises(ValueError, match='but this model is a supernet'):
        apply_checkpoint(supernet, state)
    apply_checkpoint(supernet, JetViT(arch='FFFF', **TINY).state_dict())  # the teacher starts a supernet


def test_subnet_and_export_carry_the_subnet_spec():
    supernet = JetViTSupernet(search_space=['LW', 'LF', 'W', 'WF'], **TINY)
    state = supernet.subnet_state_dict('LFWF')
    assert ArchSpec.from_tensor(state[SPEC_KEY]).arch == 'LFWF'
    assert ArchSpec.from_tensor(supernet.state_dict()[SPEC_KEY]).search_space == ('LW', 'LF', 'W', 'WF')
    subnet = supernet.extract_subnet('LFWF')
    assert subnet.spec.arch == 'LFWF' and torch.equal(subnet.state_dict()[SPEC_KEY], state[SPEC_KEY])
    with pytest.raises(ValueError, match="holds a JetViT with arch 'LFWF'"):
        apply_checkpoint(JetViT(arch='LWWF', **TINY), state)


def test_hybrid_checkpoints_must_hold_their_l_convs_and_teacher_files_stay_lenient(tmp_path):
    hybrid = JetViT(arch='LWLF', **TINY)
    without_convs = {k: v for k, v in hybrid.state_dict().items() if '.attn.conv.' not in k}
    torch.save(without_convs, tmp_path / 'hybrid.pth')
    with pytest.raises(RuntimeError, match=r'missing keys: blocks\.0\.attn\.conv\.fc1\.weight'):
        JetViT(arch='LWLF', checkpoint=tmp_path / 'hybrid.pth', **TINY)
    # teacher files (no spec, or all F) have no convs: the L layers keep theirs as initialised
    teacher = {k: v for k, v in JetViT(arch='FFFF', **TINY).state_dict().items()}
    for name, weights in (('teacher.pth', teacher), ('old_teacher.pth', {k: v for k, v in teacher.items()
                                                                          if k != SPEC_KEY})):
        torch.save(weights, tmp_path / name)
        model = JetViT(arch='LWLF', checkpoint=tmp_path / name, **TINY)
        assert torch.equal(model.blocks[3].attn.qkv.weight, teacher['blocks.3.attn.qkv.weight'])


@pytest.mark.parametrize('version', [1, 3])
def test_a_spec_of_another_version_is_refused_as_any_unknown_spec(tmp_path, version):
    """Formats this project never released (a version-1 spec) get the one error any unknown version gets."""
    import json

    state = JetViT(arch='LWLF', **TINY).state_dict()
    data = dict(JetViT(arch='LWLF', **TINY).spec.to_dict(), version=version)
    state[SPEC_KEY] = torch.tensor(list(json.dumps(data).encode()), dtype=torch.uint8)
    torch.save(state, tmp_path / 'other.pth')
    with pytest.raises(ValueError, match=rf'other\.pth.*arch spec version {version}; this jetvit_mm reads version 2'):
        JetViT(arch='LWLF', checkpoint=tmp_path / 'other.pth', **TINY)
    check_spec(None, JetViT(arch='LWLF', **TINY).spec, 'no spec')  # nothing known: nothing to refuse


def test_former_mixer_arguments_name_the_mixers_entry():
    with pytest.raises(TypeError, match="window_size=2: no longer an argument; set mixers.W.window_size"):
        JetViT(arch='LWLF', window_size=2, **TINY)


def test_mmseg_init_model_and_mmengine_load_checkpoint_refuse_another_arch(tmp_path):
    """W and F layers have the same keys: without the spec an LWLF checkpoint loaded into an LFLW model through
    mmseg's API without a word."""
    from mmengine.runner import load_checkpoint
    from mmseg.apis import init_model

    import jetvit_mm.mm  # noqa: F401  (the config's custom_imports)

    trained = init_model(str(PROBE), device='cpu')
    assert trained.backbone.arch == 'LWLF'
    torch.save(dict(state_dict=trained.state_dict(), meta={}), tmp_path / 'lwlf.pth')
    other = dict(model=dict(backbone=dict(arch='LFLW')))
    with pytest.raises(ValueError, match="holds a JetViT with arch 'LWLF', but this model has arch 'LFLW'"):
        init_model(str(PROBE), str(tmp_path / 'lwlf.pth'), device='cpu', cfg_options=other)
    with pytest.raises(ValueError, match="holds a JetViT with arch 'LWLF'"):
        load_checkpoint(init_model(str(PROBE), device='cpu', cfg_options=other), str(tmp_path / 'lwlf.pth'))
    same = init_model(str(PROBE), str(tmp_path / 'lwlf.pth'), device='cpu')
    assert torch.equal(same.backbone.blocks[1].attn.qkv.weight, trained.backbone.blocks[1].attn.qkv.weight)
    # a file without the spec (a teacher's, an old checkpoint's) still loads non-strictly, with mmengine's warning
    torch.save(dict(state_dict={k: v for k, v in trained.state_dict().items() if not k.endswith(SPEC_KEY)},
                    meta={}), tmp_path / 'old.pth')
    loaded = init_model(str(PROBE), str(tmp_path / 'old.pth'), device='cpu', cfg_options=other)
    assert torch.equal(loaded.backbone.blocks[1].attn.qkv.weight, trained.backbone.blocks[1].attn.qkv.weight)
