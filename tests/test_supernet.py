"""Supernet, single-path sampling hook and feature distillation (issue: supernet + distillation)."""
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

from jetvit_mm.distill import LOSSES, activation_matching_loss, distill_loss
from jetvit_mm.models import JetViT
from jetvit_mm.models.checkpoint import read
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.supernet import JetViTSupernet, parse_search_space, step2_search_space
from jetvit_mm.search import SupernetSampler

from .conftest import HANG_GUARD_S, REPO, run_tool

CONFIG = REPO / 'tests' / 'configs' / 'distill_supernet_tiny_cityscapes.py'
TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2,
            mixers=default_mixers(W=dict(window_size=4)))  # as the config


def make_teacher_checkpoint(path: Path) -> Path:
    """A tiny random teacher whose attention matters (LayerScale 1, peaky attention), saved in JetViT format."""
    torch.manual_seed(0)
    teacher = JetViT(**TINY)
    with torch.no_grad():
        for block in teacher.blocks:
            block.ls1.gamma.fill_(1.0)
            block.ls2.gamma.fill_(1.0)
            block.attn.qkv.weight.normal_(0, 2 / 32 ** 0.5)
            block.attn.proj.weight.normal_(0, 1 / 32 ** 0.5)
    torch.save(teacher.state_dict(), path)
    return path


@pytest.fixture(scope='module')
def teacher_ckpt(tmp_path_factory) -> Path:
    return make_teacher_checkpoint(tmp_path_factory.mktemp('teacher') / 'teacher.pth')


def options(data: Path, teacher: Path, *extra: str) -> list:
    return ['--cfg-options', f'train_dataloader.dataset.data_root={data}', f'model.teacher.checkpoint={teacher}',
            *extra]


def read_paths(work_dir: Path, rank: int = 0) -> dict:
    lines = (work_dir / f'supernet_paths.rank{rank}.jsonl').read_text().splitlines()
    return {r['iter']: r['arch'] for r in map(json.loads, lines)}


def build_distiller(teacher: Optional[Path], **overrides):
    from mmseg.registry import MODELS

    import jetvit_mm.mm  # noqa: F401  (registers the types)

    cfg = Config.fromfile(CONFIG)
    cfg.model.teacher.checkpoint = None if teacher is None else str(teacher)
    cfg.model.update(overrides)
    with DefaultScope.overwrite_default_scope('mmseg'):
        return MODELS.build(cfg.model)


# ----------------------------------------------------------------------------- pure parts
def test_search_space_parsing_and_step2():
    assert parse_search_space('LW', 3) == ('LW', 'LW', 'LW')
    assert parse_search_space(['LF', 'WWF', 'F'], 3) == ('LF', 'WF', 'F')
    assert step2_search_space('LWF') == ('LF', 'WF', 'F')
    with pytest.raises(ValueError, match=r"layer 1: unknown mixer letter\(s\) \['X'\].*valid letters: F, L, W"):
        parse_search_space(['L', 'LX', 'W'], 3)
    with pytest.raises(ValueError, match='3 layers, expected one per layer: 4'):
        parse_search_space(['L', 'W', 'F'], 4)


def test_unknown_mixer_in_search_space_fails_at_build():
    with pytest.raises(ValueError, match="unknown mixer letter"):
        JetViTSupernet(search_space='LQ', **TINY)


def test_sampler_is_a_function_of_seed_and_iteration():
    space = ('LW', 'LWF', 'WF', 'F', 'LF')
    a, b = SupernetSampler(space, seed=3), SupernetSampler(space, seed=3)
    paths = [a.sample(i) for i in range(50)]
    assert paths == [b.sample(i) for i in range(50)]
    assert paths != [SupernetSampler(space, seed=4).sample(i) for i in range(50)]
    assert len(set(paths)) > 10
    assert all(p[i] in space[i] for p in paths for i in range(len(space)))
    budgeted = SupernetSampler(space, seed=0, mode='budgeted', max_full=2)
    counts = {budgeted.sample(i).count('F') for i in range(200)}
    assert counts == {1, 2}  # layer 3 is always F; at most 2 F layers
    with pytest.raises(ValueError, match='impossible'):
        SupernetSampler(space, mode='budgeted', max_full=5)
    with pytest.raises(ValueError, match="unknown sampler mode 'greedy'; valid: uniform, budgeted"):
        SupernetSampler(space, mode='greedy')


@pytest.mark.parametrize('arch', ['LWLF', 'FFFF', 'WWWW', 'LLLL'])
def test_extracted_subnet_equals_supernet_path(arch):
    torch.manual_seed(0)
    supernet = JetViTSupernet(search_space='LWF', **TINY).eval()
    with torch.no_grad():  # make the candidates differ from each other, as after training
        for p in supernet.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    supernet.set_arch(arch)
    subnet = supernet.extract_subnet(arch).eval()
    assert subnet.arch == arch
    x = torch.randn(2, 3, 48, 80)
    with torch.no_grad():
        assert torch.equal(supernet(x)[0], subnet(x)[0])
    half = supernet.bfloat16().extract_subnet(arch)  # the subnet keeps the supernet's dtype
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16}


def test_supernet_candidates_inherit_teacher_attention(teacher_ckpt):
    teacher = JetViT(checkpoint=teacher_ckpt, **TINY)
    supernet = JetViTSupernet(search_space='LWF', checkpoint=teacher_ckpt, **TINY)
    for t_block, s_block in zip(teacher.blocks, supernet.blocks):
        for mixer in s_block.attn.candidates.values():
            assert torch.equal(mixer.qkv.weight, t_block.attn.qkv.weight)
            assert torch.equal(mixer.proj.weight, t_block.attn.proj.weight)
        assert s_block.mlp is not t_block.mlp and torch.equal(s_block.mlp.fc1.weight, t_block.mlp.fc1.weight)


def test_losses_zero_on_identical_features_and_positive_otherwise():
    torch.manual_seed(0)
    t = torch.randn(2, 50, 8)
    for name in LOSSES:
        assert distill_loss(name, [t.clone()], [t]).item() == pytest.approx(0, abs=1e-6)
        assert distill_loss(name, [t + torch.randn_like(t)], [t]).item() > 1e-3
    big = torch.randn(1, 300, 8)
    assert activation_matching_loss(big, big, max_tokens=64).item() == pytest.approx(0, abs=1e-6)
    # loss_cfg reaches the loss: all 300 tokens equal the explicit full computation, a subset does not
    noisy = big + 0.5 * torch.randn_like(big)
    full = activation_matching_loss(noisy, big, max_tokens=None)
    assert distill_loss('activation', [noisy], [big], dict(max_tokens=300)) == pytest.approx(full.item(), rel=1e-6)
    assert distill_loss('activation', [noisy], [big], dict(max_tokens=16)) != pytest.approx(full.item(), rel=1e-6)
    with pytest.raises(TypeError, match=r"unknown loss_cfg key\(s\) \['max_token'\] for loss 'activation'; "
                                        r"valid: \['max_tokens'\]"):
        distill_loss('activation', [noisy], [big], dict(max_token=16))
    with pytest.raises(TypeError, match=r"for loss 'mse'; valid: none"):
        distill_loss('mse', [noisy], [big], dict(max_tokens=16))


def test_activation_matching_loss_equals_an_independent_formula():
    """ViT-Linearizer's activation matching, written out pair by pair: A[i, j] = cos(f_i, f_j) per image; the loss
    is the mean over images and tokens i of 1 - cos(A_student[i, :], A_teacher[i, :])."""
    g = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(2, 6, 5, generator=g), torch.randn(2, 6, 5, generator=g)

    def similarity(x):
        n = x.shape[0]
        return torch.tensor([[torch.nn.functional.cosine_similarity(x[i], x[j], dim=0).item() for j in range(n)]
                             for i in range(n)], dtype=torch.float64)

    terms = []
    for s_img, t_img in zip(student.double(), teacher.double()):
        a_s, a_t = similarity(s_img), similarity(t_img)
        terms += [1 - torch.dot(a_s[i], a_t[i]) / (a_s[i].norm() * a_t[i].norm()) for i in range(a_s.shape[0])]
    expected = torch.stack(terms).mean()
    assert activation_matching_loss(student, teacher, max_tokens=None).item() == pytest.approx(expected.item(),
                                                                                                rel=1e-5, abs=1e-6)
    assert expected.item() > 0.05  # a non-trivial value to compare
    # with a token subset, the formula on those tokens (the same subset for student and teacher)
    keep = torch.randperm(6, generator=torch.Generator().manual_seed(3))[:4]
    subset = activation_matching_loss(student, teacher, max_tokens=4, generator=torch.Generator().manual_seed(3))
    assert subset.item() == pytest.approx(activation_matching_loss(student[:, keep], teacher[:, keep],
                                                                   max_tokens=None).item(), rel=1e-6)


# ----------------------------------------------------------------------------- distiller
def test_distiller_build_errors(teacher_ckpt):
    with pytest.raises(ValueError, match=r'out index 7 out of range for a 4-layer model'):
        build_distiller(teacher_ckpt, distill_indices=(7, ))
    with pytest.raises(ValueError, match=r"unknown distillation loss 'l3'; valid: mse, cosine, smooth_l1, activation"):
        build_distiller(teacher_ckpt, loss='l3')
    with pytest.raises(TypeError, match=r"unknown loss_cfg key\(s\) \['tokens'\]"):
        build_distiller(teacher_ckpt, loss='activation', loss_cfg=dict(tokens=8))
    assert build_distiller(teacher_ckpt, loss='activation', loss_cfg=dict(max_tokens=8)).loss_cfg == dict(max_tokens=8)
    with pytest.warns(UserWarning, match='the teacher has no checkpoint'):  # a random teacher is legal, but said
        build_distiller(None)


def test_distiller_student_starts_as_teacher(teacher_ckpt):
    distiller = build_distiller(teacher_ckpt)
    assert all(not p.requires_grad for p in distiller.teacher.parameters())
    distiller.train()
    assert not distiller.teacher.training and distiller.student.training
    x = torch.randn(1, 3, 64, 128)
    with torch.no_grad():  # a supernet path of full attention would be the teacher itself
        subnet = distiller.student.extract_subnet('LLLL')
        assert torch.equal(subnet.blocks[2].mlp.fc2.weight, distiller.teacher.blocks[2].mlp.fc2.weight)
        assert distiller.loss(x)['loss_distill'] > 0


def test_one_distillation_objective_for_the_mm_model_the_planner_and_the_benchmark(teacher_ckpt):
    """The mmengine FeatureDistiller, the memory planner's model and the benchmark's step all run the pure Distiller
    (issue 31 item 4): the same loss, bit for bit, as the Distiller on the same teacher and student."""
    from jetvit_mm.benchmark.distill import build_distiller as bench_distiller
    from jetvit_mm.benchmark.distill import distill_step
    from jetvit_mm.benchmark.memory import build_distill
    from jetvit_mm.distill.distiller import Distiller

    model = build_distiller(teacher_ckpt, loss='smooth_l1', loss_weight=0.5, distill_indices=(1, -1))
    model.student.set_arch('LWLW')
    assert isinstance(model.objective, Distiller) and model.objective.student is model.student
    assert not any(k.startswith('objective') for k in model.state_dict())
    x = torch.randn(1, 3, 32, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model.student.blocks[1].attn.candidates['W'].qkv.weight.add_(0.1)  # a student that is not its teacher
        pure = Distiller(model.teacher, model.student, indices=(1, 3), loss='smooth_l1', loss_weight=0.5)(x)
        assert torch.equal(model.loss(x)['loss_distill'], pure) and pure > 0
    spec = dict(model=TINY, arch='LWFW')
    planner_model, loss_fn = build_distill(spec)
    assert isinstance(planner_model, Distiller) and loss_fn is planner_model
    assert planner_model.student.arch == 'LWFW' and not planner_model.teacher.training
    bench = bench_distiller(TINY, 'LWLW', supernet=False)
    assert isinstance(bench, Distiller) and bench.student.arch == 'LWLW'
    before = {n: p.detach().clone() for n, p in bench.named_parameters()}
    optimizer = torch.optim.AdamW([p for p in bench.parameters() if p.requires_grad], lr=1e-3)
    loss = distill_step(bench, optimizer, x)
    assert loss > 0 and not loss.requires_grad
    changed = {n for n, p in bench.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(n.startswith('student.') for n in changed)


@pytest.mark.parametrize('loss', list(LOSSES))
def test_distillation_loss_is_fp32_with_bf16_parameters(teacher_ckpt, loss):
    """bf16 parameters (FSDP2's param_dtype='bfloat16' computes the blocks so, and the features leave the root unit
    in bf16): the loss is computed in fp32, equal to the loss of the same features upcast."""
    distiller = build_distiller(teacher_ckpt, loss=loss).to(torch.bfloat16)
    distiller.student.set_arch('LWLW')
    x = torch.randn(2, 3, 32, 64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    out = distiller.loss(x)['loss_distill']
    with torch.no_grad():
        features = distiller.extract_feat(distiller.student, x)
        targets = distiller.extract_feat(distiller.teacher, x)
    assert features[0].dtype == torch.bfloat16 and out.dtype == torch.float32
    upcast = [f.float() for f in features], [t.float() for t in targets]
    expected = torch.stack([LOSSES[loss](s, t) for s, t in zip(*upcast)]).mean()
    assert out.item() == pytest.approx(expected.item(), rel=1e-6, abs=1e-9)
    if loss == 'mse':  # and written out: the squared error in fp32 (in bf16 the mean rounds to 8 mantissa bits)
        assert out.item() == pytest.approx((upcast[0][0] - upcast[1][0]).pow(2).mean().item(), rel=1e-6)


@pytest.mark.parametrize('conv', ['static', 'squeeze', 'token'])
@pytest.mark.parametrize('optim', ['layer_decay', 'distill_schedule'])
def test_the_static_kernel_trains_without_weight_decay_in_every_conv_variant(conv, optim):
    """The L conv's static kernel (the 4-D kernel of 'static', the generator's last bias of 'squeeze' / 'token')
    gets no weight decay in either optimizer set-up; the generator's weight matrices do."""
    from mmengine.optim import build_optim_wrapper

    import jetvit_mm.mm  # noqa: F401  (registers the constructor)

    supernet = JetViTSupernet(search_space='LW', **dict(TINY, mixers=default_mixers(W=dict(window_size=4),
                                                                                     L=dict(conv=conv))))
    model = torch.nn.Module()
    model.student = supernet  # as in the FeatureDistiller
    if optim == 'layer_decay':
        model = supernet  # the constructor takes the ViT itself (or a model with it as `backbone`)
        cfg = dict(type='OptimWrapper', constructor='LayerDecayOptimWrapperConstructor',
                   paramwise_cfg=dict(layer_decay_rate=0.9), optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05))
    else:
        cfg = Config.fromfile(REPO / 'configs' / '_base_' / 'schedules' / 'distill_20k.py').optim_wrapper
    optimizer = build_optim_wrapper(model, cfg).optimizer
    decay = {id(p): group['weight_decay'] for group in optimizer.param_groups for p in group['params']}
    conv_params = {n: p for n, p in model.named_parameters() if '.candidates.L.conv.' in n}
    static = [n for n in conv_params if n.endswith(('conv.weight', 'conv.fc2.bias'))]
    assert len(static) == TINY['depth']
    for name, param in conv_params.items():
        assert decay[id(param)] == (0. if name in static else 0.05), name
        assert param.requires_grad


# ----------------------------------------------------------------------------- through tools/train.py
@pytest.fixture(scope='module')
def trained(tiny_cityscapes, teacher_ckpt, tmp_path_factory):
    work_dir = tmp_path_factory.mktemp('supernet')
    run_tool('train.py', CONFIG, '--work-dir', work_dir,
             *options(tiny_cityscapes, teacher_ckpt, 'train_cfg.max_iters=24', 'default_hooks.checkpoint.interval=6',
                      'optim_wrapper.optimizer.lr=5e-4'))
    return work_dir


@pytest.mark.integration
def test_training_lowers_loss_keeps_teacher_and_samples_paths(trained, tiny_cityscapes, teacher_ckpt):
    paths = read_paths(trained)
    assert sorted(paths) == list(range(24))
    assert len(set(paths.values())) >= 4, paths
    state = read(str(trained / 'iter_24.pth')).raw['state_dict']
    teacher = JetViT(checkpoint=teacher_ckpt, **TINY).state_dict()
    for key, value in teacher.items():
        assert torch.equal(state[f'teacher.{key}'], value), key
    # distillation loss on fixed validation images, for fixed paths: lower after training than at the start
    from mmcv import imread
    images = sorted((tiny_cityscapes / 'leftImg8bit' / 'val').rglob('*.png'))
    mean, std = torch.tensor([123.675, 116.28, 103.53]), torch.tensor([58.395, 57.12, 57.375])
    x = torch.stack([(torch.from_numpy(imread(str(p), channel_order='rgb')).float() - mean) / std for p in images])
    x = x.permute(0, 3, 1, 2)
    before = build_distiller(teacher_ckpt).eval()
    after = build_distiller(teacher_ckpt).eval()
    after.load_state_dict(state)
    losses = {}
    with torch.no_grad():
        for arch in map(''.join, itertools.product('LW', repeat=4)):  # every path: the mean is not one path's luck
            before.student.set_arch(arch)
            after.student.set_arch(arch)
            losses[arch] = (before.loss(x)['loss_distill'].item(), after.loss(x)['loss_distill'].item())
    mean_before, mean_after = (sum(v[i] for v in losses.values()) / len(losses) for i in (0, 1))
    assert mean_after < 0.95 * mean_before, losses


@pytest.mark.integration
def test_resume_continues_the_path_sequence(trained, tiny_cityscapes, teacher_ckpt, tmp_path):
    resumed = tmp_path / 'resumed'
    resumed.mkdir()
    shutil.copy(trained / 'iter_6.pth', resumed / 'iter_6.pth')
    (resumed / 'last_checkpoint').write_text(str(resumed / 'iter_6.pth'))
    run_tool('train.py', CONFIG, '--work-dir', resumed, '--resume',
             *options(tiny_cityscapes, teacher_ckpt, 'train_cfg.max_iters=12', 'default_hooks.checkpoint.interval=6',
                      'optim_wrapper.optimizer.lr=5e-4'))
    uninterrupted, continued = read_paths(trained), read_paths(resumed)
    assert sorted(continued) == list(range(6, 12))
    assert continued == {i: uninterrupted[i] for i in range(6, 12)}


@pytest.mark.parametrize('diff_rank_seed', [False, True])
@pytest.mark.integration
def test_two_process_cpu_training_samples_the_same_path(tiny_cityscapes, teacher_ckpt, tmp_path, diff_rank_seed):
    """Both ranks train the same path, also when mmengine seeds each rank differently (diff_rank_seed)."""
    torchrun = Path(sys.executable).with_name('torchrun')
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1')
    # --standalone: a rendezvous on a free local port (a fixed --master_port collides with any other run using it)
    cmd = [str(torchrun), '--standalone', '--nproc_per_node=2',
           str(REPO / 'tools' / 'train.py'), str(CONFIG), '--launcher', 'pytorch', '--work-dir', str(tmp_path),
           *options(tiny_cityscapes, teacher_ckpt, 'train_cfg.max_iters=3', 'default_hooks.checkpoint.interval=3',
                    'randomness.seed=5', f'randomness.diff_rank_seed={diff_rank_seed}')]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-5000:]
    rank0, rank1 = read_paths(tmp_path, 0), read_paths(tmp_path, 1)
    assert sorted(rank0) == [0, 1, 2] and rank0 == rank1
    assert 'MMDistributedDataParallel' in (proc.stdout + proc.stderr) or (tmp_path / 'iter_3.pth').is_file()
