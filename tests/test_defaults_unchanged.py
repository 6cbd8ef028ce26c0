"""Today's default models: the same state dict keys, tensors and outputs as main's code computed them before the open
search space (issue 23), and the specs they save read as the same ArchSpec (tests/default_models.py wrote the
reference). Tensors and outputs are compared up to rounding, which differs between CPU models, so the test holds on
every machine of this kind (an AMD EPYC and an Intel Xeon with AMX alike)."""
import pytest
import torch

from jetvit_mm.models import ArchSpec

from .conftest import REPO
from .default_models import CASES, run_case, summaries_match, summary

REFERENCE = REPO / 'tests' / 'reference' / 'default_models.pt'


@pytest.fixture(scope='module')
def reference():
    return torch.load(REFERENCE, weights_only=True)


@pytest.mark.parametrize('name', sorted(CASES))
def test_default_model_is_unchanged(reference, name):
    ref = reference['cases'][name]
    now = run_case(name)
    assert now['keys'] == ref['keys']
    assert set(now['summaries']) == set(ref['summaries'])
    moved = [k for k, s in now['summaries'].items() if not summaries_match(s, ref['summaries'][k])]
    assert not moved, f'tensors that differ from the reference by more than rounding: {moved}'
    assert len(now['outputs']) == len(ref['outputs'])
    for a, b in zip(now['outputs'], ref['outputs']):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert set(now['specs']) == set(ref['specs'])
    for key, spec in ref['specs'].items():  # a version-1 spec of the reference is no longer comparable
        if spec.get('version') == 2:
            assert ArchSpec.from_dict(now['specs'][key]) == ArchSpec.from_dict(spec)
        assert now['specs'][key]['version'] == 2


def test_a_summary_moves_with_a_changed_value_or_order_but_not_with_rounding():
    """The tolerance admits rounding (every value off by up to 2 ulps), not a real change: one value moved by 5 % of
    the mean magnitude, two values swapped, a tensor scaled by 1.0001, reshaped or another dtype."""
    torch.manual_seed(0)
    w = torch.randn(96, 32)
    ref = summary(w)
    ulp = w + w.abs() * torch.finfo(torch.float32).eps * torch.randint(-2, 3, w.shape)
    assert summaries_match(summary(ulp), ref)
    moved, swapped = w.clone(), w.clone()
    moved[3, 4] += 0.05 * w.abs().mean()
    swapped[0, 0], swapped[5, 7] = w[5, 7], w[0, 0]
    for other in (moved, swapped, w * 1.0001, w.reshape(32, 96), w.double()):
        assert not summaries_match(summary(other), ref)
