"""Today's default models, bit for bit: the same state dict keys, tensors and outputs as main's code computed them
before the open search space (issue 23), and the specs they save read as the same ArchSpec
(tests/default_models.py wrote the reference)."""
import pytest
import torch

from jetvit_mm.models import ArchSpec, JetViT
from jetvit_mm.models.arch import SPEC_KEY

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
    for key, spec in ref['specs'].items():  # version 1 (options only) and 2 (letter -> type table): the same spec
        assert ArchSpec.from_dict(now['specs'][key]) == ArchSpec.from_dict(spec)
        assert now['specs'][key]['version'] == 2


def test_checkpoint_saved_by_main_loads_and_computes_the_same(reference):
    state = dict(reference['old_checkpoint'])
    assert ArchSpec.from_tensor(state[SPEC_KEY]).to_dict()['mixers']['W'] == {'type': 'WindowAttention',
                                                                             'window_size': 2}
    torch.manual_seed(5)
    model = JetViT(arch='LWF', window_size=2, model_name='dinov3_vits16', embed_dim=16, depth=3, num_heads=2).eval()
    model.load_jetvit_state_dict(state, source='main checkpoint')
    torch.manual_seed(1)
    x = torch.randn(*CASES[OLD_CHECKPOINT_CASE][1])
    with torch.no_grad():
        assert torch.equal(model(x)[0], reference['cases'][OLD_CHECKPOINT_CASE]['outputs'][0])
    other = JetViT(arch='LWF', window_size=3, model_name='dinov3_vits16', embed_dim=16, depth=3, num_heads=2)
    with pytest.raises(ValueError, match='window_size=2'):
        other.load_jetvit_state_dict(state, source='main checkpoint')
