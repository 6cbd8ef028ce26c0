"""The example plugin (examples/pooled_attention, issue 23 item 3): a fourth mixer from outside the package,
against its own quadratic reference, and through the pipeline."""
import pytest
import torch
from timm.layers import RotaryEmbeddingDinoV3

from jetvit_mm.models.checkpoint import apply_checkpoint
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


# ----------------------------------------------------------------------------- a mixer that inherits nothing
TINY_TABLE = dict(L=dict(type='LinearAttention'), W=dict(type='WindowAttention'),
                  P=dict(type='PooledAttention', pool_size=2), C=dict(type='DepthwiseConvMixer', kernel_size=3),
                  F=dict(type='FullAttention'))


@pytest.mark.parametrize('grid', [(3, 4), (1, 5)])
def test_depthwise_conv_mixer_matches_its_reference(pooled, grid):
    mixer = _mixer(pooled.DepthwiseConvMixer)
    with torch.no_grad():
        for p in mixer.parameters():  # its output projection starts at zero: make every term show
            p.normal_(0, 0.3)
    x = torch.randn(2, PREFIX + grid[0] * grid[1], DIM, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = mixer(x, grid, None)
    assert (out.double() - pooled.depthwise_conv_mixer_reference(mixer, x, grid)).abs().max() < 1e-5


def _teacher_state(seed: int = 0) -> dict:
    """A tiny teacher whose q/k/v/o are not any mixer's init (non-zero proj)."""
    from jetvit_mm.models import JetViT

    from .test_supernet import TINY
    torch.manual_seed(seed)
    teacher = JetViT(**TINY)
    with torch.no_grad():
        for block in teacher.blocks:
            block.attn.proj.weight.normal_(0, 0.2)
    return teacher.state_dict()


def test_a_mixer_that_inherits_nothing_joins_the_supernet_with_its_own_init(pooled, tmp_path):
    """``inherits = 'none'`` (C): the distiller builds (it loads the teacher's weights into the supernet), the C
    candidates keep their own init (zero ``proj``, although it has the teacher's name and shape), the others
    inherit q/k/v/o; a plain JetViT with C layers loads the teacher's file too."""
    from jetvit_mm.mm.registry import MODELS
    from jetvit_mm.models import JetViT

    from .test_supernet import TINY
    teacher = _teacher_state()
    torch.save(teacher, tmp_path / 'teacher.pth')
    tiny = dict(TINY, mixers={**TINY_TABLE, 'W': TINY['mixers']['W']})  # the plugin's letters, TINY's W window
    distiller = MODELS.build(dict(type='FeatureDistiller',  # the student starts from the teacher's weights
                                  teacher=dict(type='JetViT', checkpoint=tmp_path / 'teacher.pth', **tiny),
                                  student=dict(type='JetViTSupernet', search_space='LPC', **tiny)))
    for i, block in enumerate(distiller.student.blocks):
        candidates = block.attn.candidates
        assert isinstance(candidates['C'], pooled.DepthwiseConvMixer)
        assert candidates['C'].proj.weight.abs().max() == 0
        for letter in 'LP':
            assert torch.equal(candidates[letter].proj.weight, teacher[f'blocks.{i}.attn.proj.weight'])
            assert torch.equal(candidates[letter].qkv.weight, teacher[f'blocks.{i}.attn.qkv.weight'])
    subnet = distiller.student.extract_subnet('CLPC')
    hybrid = JetViT(arch='CLPC', **tiny)
    apply_checkpoint(hybrid, subnet.state_dict(), source='hybrid')  # strict: the C keys are its own
    from_teacher = JetViT(arch='CLPC', **tiny)
    apply_checkpoint(from_teacher, teacher, source='teacher')
    assert from_teacher.blocks[0].attn.proj.weight.abs().max() == 0
    assert torch.equal(from_teacher.blocks[1].attn.proj.weight, teacher['blocks.1.attn.proj.weight'])
    x = torch.randn(1, 3, 32, 48, generator=torch.Generator().manual_seed(5))
    distiller.student.set_arch('CLPC')
    with torch.no_grad():
        assert torch.allclose(distiller.student(x)[0], subnet(x)[0], atol=1e-5)


# ----------------------------------------------------------------------------- the pipeline, at toy size
@pytest.mark.integration
def test_plugin_runs_through_distillation_search_export_and_test_tool(tiny_cityscapes, tmp_path, pooled):
    """A tiny teacher and its probe head; the plugin's supernet (L, W, P, C per layer; C inherits nothing)
    distilled; Step 1 searched from all-P (``--step1-order PCLW``: the user's order, P taken as the cheapest) with
    the export; tools/test.py scores the exported hybrid as the search did; the export meta carries the letter ->
    type table; a hybrid with C layers is exported from the supernet and fine-tuned."""
    import json

    from mmengine.config import Config

    from jetvit_mm.models import JetViT
    from jetvit_mm.models.arch import SPEC_KEY, ArchSpec
    from jetvit_mm.models.checkpoint import read

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
    supernet_ckpt = read(str(tmp_path / 'distill' / 'iter_3.pth')).raw
    assert {k.split('.')[5] for k in supernet_ckpt['state_dict'] if '.candidates.' in k} == {'L', 'W', 'P', 'C'}
    work = tmp_path / 'search'
    run_tool('search.py', seg, tmp_path / 'distill' / 'iter_3.pth', '--head-checkpoint', tmp_path / 'probe' /
             'iter_4.pth', '--work-dir', work, '--beam-width', '2', '--step1-order', 'PCLW', '--min-gain', '1000',
             '--export', '--distill-config', distill, '--cfg-options', data[1], env=env)
    summary = json.loads((work / 'search.json').read_text())
    best = summary['best']['1']['arch']
    assert best == 'PPPP'  # the start (every layer at its cheapest by the given order); no move gains 1000
    records = {r['arch']: r for r in summary['archs']}
    assert len(records) == 1 + 12 and all(r['P'] == a.count('P') for a, r in records.items())  # P -> C, L or W
    assert sum(a.count('C') for a in records) == 4  # each layer's C candidate scored once
    assert json.loads((work / 'search_state.json').read_text())['stages']['1']['order'] == 'PCLW'
    state = read(str(work / f'hybrid_{best}_with_head.pth')).raw['state_dict']
    spec = ArchSpec.from_tensor(state[f'backbone.{SPEC_KEY}'])
    assert spec.mixers['P'] == {'type': 'PooledAttention', 'pool_size': 2}
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
    finetuned = read(str(tmp_path / 'ft' / 'iter_1.pth')).raw
    hybrid = JetViT(arch=best, checkpoint=tmp_path / 'ft' / 'iter_1.pth', **backbone)  # its student, P layers
    assert isinstance(hybrid.blocks[0].attn, pooled.PooledAttention)
    assert {k for k in finetuned['state_dict'] if k.startswith('student.')} == {
        f'student.{k}' for k in hybrid.state_dict()}
    # a hybrid with layers of the mixer that inherits nothing: exported from the supernet (tools/export_hybrid.py's
    # function: the tool's --arch takes only the default letters) and fine-tuned
    from jetvit_mm.mm.apis.export import export_from_checkpoint
    mixed = 'CPCL'
    export_from_checkpoint(Config.fromfile(seg), str(tmp_path / 'distill' / 'iter_3.pth'), mixed, tmp_path / 'mixed',
                           distill_config=str(distill))
    exported = JetViT(arch=mixed, checkpoint=tmp_path / 'mixed' / f'hybrid_{mixed}.pth', **backbone)
    for i, letter in enumerate(mixed):  # the C layers hold the supernet's C candidates, as distilled
        assert isinstance(exported.blocks[i].attn, pooled.DepthwiseConvMixer) == (letter == 'C')
        candidate = f'student.blocks.{i}.attn.candidates.{letter}.proj.weight'
        assert torch.equal(exported.blocks[i].attn.proj.weight, supernet_ckpt['state_dict'][candidate])
    run_tool('train.py', tmp_path / 'mixed' / f'finetune_{mixed}.py', '--work-dir', tmp_path / 'ft_mixed',
             '--cfg-options', data[0], f'model.teacher.checkpoint={teacher}', 'train_cfg.max_iters=1', env=env)
    tuned = JetViT(arch=mixed, checkpoint=tmp_path / 'ft_mixed' / 'iter_1.pth', **backbone)
    assert not torch.equal(tuned.blocks[0].attn.proj.weight, exported.blocks[0].attn.proj.weight)  # it trained
