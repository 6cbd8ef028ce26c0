"""Today's default models, bit for bit: the same state dict keys, tensors and outputs as main's code computed them
before the open search space (issue 23), and the specs they save read as the same ArchSpec
(tests/default_models.py wrote the reference)."""
import pytest
import torch

from jetvit_mm.models import ArchSpec, JetViT
from jetvit_mm.models.arch import SPEC_KEY
from jetvit_mm.models.checkpoints.legacy import upgrade_spec_dict, upgrade_state
from jetvit_mm.models.mixers import default_mixers

from .conftest import REPO
from .default_models import CASES, OLD_CHECKPOINT_CASE, run_case

REFERENCE = REPO / 'tests' / 'reference' / 'default_models.pt'


@pytest.fixture(scope='module')
def reference():
    saved = torch.load(REFERENCE, weights_only=True)
    if saved['cpu_capability'] != torch.backends.cpu.get_cpu_capability():
        pytest.skip(f'the reference outputs were computed with CPU capability {saved["cpu_capability"]}; this CPU '
                    f'has {torch.backends.cpu.get_cpu_capability()} (other kernels, other rounding)')
    return saved


@pytest.mark.parametrize('name', sorted(CASES))
def test_default_model_is_unchanged(reference, name):
    ref = reference['cases'][name]
    now = run_case(name)
    assert now['keys'] == ref['keys']
    assert now['digests'] == ref['digests']
    assert len(now['outputs']) == len(ref['outputs'])
    for a, b in zip(now['outputs'], ref['outputs']):
        assert torch.equal(a, b)
    assert set(now['specs']) == set(ref['specs'])
    for key, spec in ref['specs'].items():  # version 1 (options only), converted, and 2 (type table): the same spec
        assert ArchSpec.from_dict(now['specs'][key]) == ArchSpec.from_dict(upgrade_spec_dict(spec))
        assert now['specs'][key]['version'] == 2


def test_checkpoint_saved_by_main_is_refused_then_converted_loads_and_computes_the_same(reference):
    """main's checkpoint holds a version-1 spec: refused naming the one-time converter; converted, it loads and
    computes the same, and still refuses another window."""
    old = dict(reference['old_checkpoint'])
    build = dict(arch='LWF', model_name='dinov3_vits16', embed_dim=16, depth=3, num_heads=2)
    torch.manual_seed(5)
    model = JetViT(mixers=default_mixers(W=dict(window_size=2)), **build).eval()
    with pytest.raises(ValueError, match=r'version 1 .*tools/upgrade_checkpoint\.py'):
        model.load_jetvit_state_dict(old, source='main checkpoint')
    state, changes = upgrade_state(old, {}, 'main checkpoint')
    assert changes == [f'{SPEC_KEY}: arch spec rewritten in version 2']
    assert ArchSpec.from_tensor(state[SPEC_KEY]).to_dict()['mixers']['W'] == {'type': 'WindowAttention',
                                                                             'window_size': 2}
    model.load_jetvit_state_dict(state, source='main checkpoint')
    torch.manual_seed(1)
    x = torch.randn(*CASES[OLD_CHECKPOINT_CASE][1])
    with torch.no_grad():
        assert torch.equal(model(x)[0], reference['cases'][OLD_CHECKPOINT_CASE]['outputs'][0])
    other = JetViT(mixers=default_mixers(W=dict(window_size=3)), **build)
    with pytest.raises(ValueError, match='mixers.W.window_size=2'):
        other.load_jetvit_state_dict(state, source='main checkpoint')
