"""The example plugin (examples/pooled_attention, issue 23 item 3): a fourth mixer from outside the package,
against its own quadratic reference, and through the pipeline."""
import pytest
import torch
from timm.layers import RotaryEmbeddingDinoV3

from jetvit_mm.models.mixers import FullAttention

from .conftest import REPO

PLUGIN = REPO / 'examples' / 'pooled_attention'
DIM, HEADS, PREFIX = 32, 2, 5


@pytest.fixture
def pooled(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN))
    import jetvit_pooled
    return jetvit_pooled


def _mixer(cls, seed=0, **kwargs):
    torch.manual_seed(seed)
    return cls(dim=DIM, num_heads=HEADS, num_prefix_tokens=PREFIX, **kwargs).eval()


@pytest.mark.parametrize('grid,pool_size', [((4, 6), 2), ((5, 7), 2), ((6, 6), 3), ((3, 5), 4)])
@pytest.mark.parametrize('with_rope', [False, True])
def test_pooled_attention_matches_its_quadratic_reference(pooled, grid, pool_size, with_rope):
    mixer = _mixer(pooled.PooledAttention, pool_size=pool_size)
    x = torch.randn(2, PREFIX + grid[0] * grid[1], DIM, generator=torch.Generator().manual_seed(1))
    rope = (RotaryEmbeddingDinoV3(DIM // HEADS, temperature=100, rotate_half=True).get_embed(shape=grid)
            if with_rope else None)
    with torch.no_grad():
        out = mixer(x, grid, rope)
        ref = pooled.pooled_attention_reference(mixer, x, grid, rope)
        full = _mixer(FullAttention)(x, grid, rope)
    assert (out.double() - ref).abs().max() < 1e-5
    assert (out - full).abs().max() > 1e-3  # pooling changes the result: the comparison can fail


def test_pool_size_one_is_full_attention(pooled):
    grid = (4, 5)
    x = torch.randn(2, PREFIX + 20, DIM, generator=torch.Generator().manual_seed(2))
    rope = RotaryEmbeddingDinoV3(DIM // HEADS, temperature=100, rotate_half=True).get_embed(shape=grid)
    with torch.no_grad():
        assert torch.allclose(_mixer(pooled.PooledAttention, pool_size=1)(x, grid, rope),
                              _mixer(FullAttention)(x, grid, rope), atol=1e-6)


def test_pooling_matrix_rows_average_their_windows(pooled):
    P = pooled.pooled.pooling_matrix(1, (3, 3), 2)
    assert P.shape == (1 + 4, 1 + 9)
    assert torch.allclose(P.sum(1), torch.ones(5, dtype=P.dtype))
    assert P[1, 1:].nonzero().flatten().tolist() == [0, 1, 3, 4] and P[4, 1:].nonzero().flatten().tolist() == [8]


# ----------------------------------------------------------------------------- the pipeline, at toy size
def test_plugin_runs_through_distillation_search_export_and_test_tool(tiny_cityscapes, tmp_path, pooled):
    """A tiny teacher and its probe head; the plugin's supernet (L, W, P per layer) distilled; Step 1 searched
    from all-P (``--step1-order PLW``: the user's order, P taken as the cheapest) with the export; tools/test.py
    scores the exported hybrid as the search did; the export meta carries the letter -> type table."""
    import json

    from mmengine.config import Config

    from jetvit_mm.mm import load_local_checkpoint
    from jetvit_mm.models import JetViT
    from jetvit_mm.models.arch import SPEC_META_KEY

    from .conftest import run_tool
    from .test_supernet import make_teacher_checkpoint

    env = {'PYTHONPATH': f'{REPO}:{PLUGIN}'}
    distill, seg = PLUGIN / 'configs' / 'distill_pooled_tiny.py', PLUGIN / 'configs' / 'seg_pooled_tiny.py'
    teacher = make_teacher_checkpoint(tmp_path / 'teacher.pth')
    data = [f'{split}_dataloader.dataset.data_root={tiny_cityscapes}' for split in ('train', 'val', 'test')]
    run_tool('train.py', seg, '--work-dir', tmp_path / 'probe', '--cfg-options', *data, 'model.backbone.arch=FFFF',
             f'model.backbone.checkpoint={teacher}', 'train_cfg.max_iters=4', 'train_cfg.val_interval=4', env=env)
    run_tool('train.py', distill, '--work-dir', tmp_path / 'distill', '--cfg-options', data[0],
             f'model.teacher.checkpoint={teacher}', 'train_cfg.max_iters=3', 'default_hooks.checkpoint.interval=3',
             env=env)
    supernet_ckpt = load_local_checkpoint(str(tmp_path / 'distill' / 'iter_3.pth'))
    assert {k.split('.')[5] for k in supernet_ckpt['state_dict'] if '.candidates.' in k} == {'L', 'W', 'P'}
    work = tmp_path / 'search'
    run_tool('search.py', seg, tmp_path / 'distill' / 'iter_3.pth', '--head-checkpoint', tmp_path / 'probe' /
             'iter_4.pth', '--work-dir', work, '--beam-width', '2', '--step1-order', 'PLW', '--min-gain', '1000',
             '--export', '--distill-config', distill, '--cfg-options', data[1], env=env)
    summary = json.loads((work / 'search.json').read_text())
    best = summary['best']['1']['arch']
    assert best == 'PPPP'  # the start (every layer at its cheapest by the given order); no move gains 1000
    records = {r['arch']: r for r in summary['archs']}
    assert len(records) == 1 + 8 and all(r['P'] == a.count('P') for a, r in records.items())  # P -> L or W, per layer
    assert json.loads((work / 'search_state.json').read_text())['stages']['1']['order'] == 'PLW'
    meta = load_local_checkpoint(str(work / f'hybrid_{best}_with_head.pth'))['meta']
    assert meta[SPEC_META_KEY]['backbone']['mixers']['P'] == {'type': 'PooledAttention', 'pool_size': 2}
    out = tmp_path / 'metrics.json'
    run_tool('test.py', seg, work / f'hybrid_{best}_with_head.pth', '--work-dir', tmp_path / 'test', '--out', out,
             '--cfg-options', f'model.backbone.arch={best}', data[2], env=env)
    assert json.loads(out.read_text())['mIoU'] == pytest.approx(summary['best']['1']['score'], abs=1e-6)
    # the exported backbone loads into a model declaring the same table, and is refused with another P
    backbone = dict(Config.fromfile(seg).model.backbone)
    backbone = {k: v for k, v in backbone.items() if k not in ('type', 'arch', 'checkpoint', 'frozen')}
    JetViT(arch=best, checkpoint=work / f'hybrid_{best}.pth', **backbone)
    other = dict(backbone, mixers=dict(backbone['mixers'], P=dict(type='PooledAttention', pool_size=3)))
    with pytest.raises(ValueError, match=r'mixers.P.pool_size=2'):
        JetViT(arch=best, checkpoint=work / f'hybrid_{best}.pth', **other)
    # the exported fine-tuning config (the arch fixed, distilled from the teacher) declares the letter and trains
    run_tool('train.py', work / f'finetune_{best}.py', '--work-dir', tmp_path / 'ft', '--cfg-options', data[0],
             f'model.teacher.checkpoint={teacher}', 'train_cfg.max_iters=1', env=env)
    finetuned = load_local_checkpoint(str(tmp_path / 'ft' / 'iter_1.pth'))
    hybrid = JetViT(arch=best, checkpoint=tmp_path / 'ft' / 'iter_1.pth', **backbone)  # its student, P layers
    assert isinstance(hybrid.blocks[0].attn, pooled.PooledAttention)
    assert {k for k in finetuned['state_dict'] if k.startswith('student.')} == {
        f'student.{k}' for k in hybrid.state_dict()}
