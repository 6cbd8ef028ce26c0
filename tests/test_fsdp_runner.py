"""FSDP2 through mmengine's runner: ``torchrun tools/train.py CONFIG --launcher pytorch`` on 2 CPU ranks (gloo, free
port), sharded (DCP) and full checkpoints, kill-and-resume continuing identically, and the checkpoints read back in one
process (the runner loader, ``JetViT(checkpoint=...)``, ``tools/test.py``-style fit check)."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from jetvit_mm.models.checkpoint import apply_checkpoint, read, strip_prefix
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.supernet import JetViTSupernet

from .conftest import HANG_GUARD_S, REPO
from .test_supernet import make_teacher_checkpoint, read_paths

pytestmark = pytest.mark.integration  # every test here starts a process

CONFIG = REPO / 'tests' / 'configs' / 'distill_supernet_tiny_cityscapes_fsdp.py'
BACKBONE = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2,
                mixers=default_mixers(W=dict(window_size=4)))


def train(work_dir: Path, data: Path, teacher: Path, *extra: str, resume: bool = False) -> str:
    """torchrun --standalone: the rendezvous picks a free port; tools/train.py's runner tears the group down."""
    exe = Path(sys.executable).with_name('torchrun')
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1', PYTHONPATH=str(REPO))
    cmd = [str(exe), '--standalone', '--nproc_per_node=2', str(REPO / 'tools' / 'train.py'), str(CONFIG),
           '--launcher', 'pytorch', '--work-dir', str(work_dir), *(['--resume'] if resume else []),
           '--cfg-options', f'train_dataloader.dataset.data_root={data}', f'model.teacher.checkpoint={teacher}',
           'randomness.seed=3', *extra]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc.stdout + proc.stderr


@pytest.fixture(scope='module')
def teacher(tmp_path_factory) -> Path:
    return make_teacher_checkpoint(tmp_path_factory.mktemp('teacher') / 'teacher.pth')


@pytest.fixture(scope='module')
def sharded_run(tiny_cityscapes, teacher, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp('sharded')
    train(work, tiny_cityscapes, teacher, 'train_cfg.max_iters=6', 'default_hooks.checkpoint.interval=3',
          'model_wrapper_cfg.checkpoint=sharded')
    return work


def weights(path: Path) -> dict:
    return read(str(path)).raw['state_dict']


def test_sharded_checkpoints_are_dcp_directories_that_load_in_one_process(sharded_run):
    raw = torch.load(sharded_run / 'iter_6.pth', map_location='cpu', weights_only=False)
    assert raw['state_dict'] == {} and 'optimizer' not in raw and raw['meta']['fsdp2_sharded'] == 'iter_6.dcp'
    assert (sharded_run / 'iter_6.dcp' / '.metadata').is_file()
    assert len(list((sharded_run / 'iter_6.dcp').glob('*.distcp'))) == 2  # one file per rank
    state = weights(sharded_run / 'iter_6.pth')
    assert any(k.startswith('student.blocks.0.attn.candidates.L.') for k in state)
    supernet = JetViTSupernet(search_space='LW', **BACKBONE)
    supernet.load_state_dict(strip_prefix(state, 'student.'))  # strict, spec checked
    assert torch.equal(supernet.state_dict()['blocks.1.mlp.fc1.weight'], state['student.blocks.1.mlp.fc1.weight'])


def test_kill_and_resume_continues_identically(sharded_run, tiny_cityscapes, teacher, tmp_path):
    for name in ('iter_3.pth', 'iter_3.dcp'):
        copy = shutil.copytree if name.endswith('.dcp') else shutil.copy
        copy(sharded_run / name, tmp_path / name)
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'iter_3.pth'))
    train(tmp_path, tiny_cityscapes, teacher, 'train_cfg.max_iters=6', 'default_hooks.checkpoint.interval=3',
          'model_wrapper_cfg.checkpoint=sharded', resume=True)
    for rank in (0, 1):
        assert read_paths(tmp_path, rank) == {i: read_paths(sharded_run, 0)[i] for i in range(3, 6)}
    resumed, uninterrupted, start = (weights(p) for p in (tmp_path / 'iter_6.pth', sharded_run / 'iter_6.pth',
                                                          sharded_run / 'iter_3.pth'))
    assert resumed.keys() == uninterrupted.keys()
    changed = 0
    for key, value in uninterrupted.items():
        assert torch.allclose(resumed[key], value, rtol=1e-5, atol=1e-6), key
        changed += int(value.is_floating_point() and not torch.equal(value, start[key]))
    assert changed > 20  # iterations 3-5 trained: the comparison is not of untouched weights


def test_full_checkpoint_on_rank0_matches_the_sharded_one(sharded_run, tiny_cityscapes, teacher, tmp_path):
    train(tmp_path, tiny_cityscapes, teacher, 'train_cfg.max_iters=3', 'default_hooks.checkpoint.interval=3')
    raw = torch.load(tmp_path / 'iter_3.pth', map_location='cpu', weights_only=False)
    assert raw['meta']['fsdp2'] == 'full' and not (tmp_path / 'iter_3.dcp').exists()
    assert all(isinstance(k, str) for k in raw['optimizer']['state'])  # by parameter name
    full, sharded = raw['state_dict'], weights(sharded_run / 'iter_3.pth')
    assert full.keys() == sharded.keys()
    assert all(torch.allclose(full[k], sharded[k], rtol=1e-5, atol=1e-6) for k in full)
    from mmengine.config import Config
    from mmengine.registry import DefaultScope

    import jetvit_mm.mm  # noqa: F401
    from jetvit_mm.mm.registry import MODELS
    cfg = Config.fromfile(str(CONFIG))
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(cfg.model)
    apply_checkpoint(model, read(tmp_path / 'iter_3.pth'), allow_unexpected=True)  # what tools/test.py applies
    assert all(torch.equal(v, full[k]) for k, v in model.state_dict().items() if k in full)


def test_kill_and_resume_from_a_full_checkpoint_continues_identically(sharded_run, tiny_cityscapes, teacher,
                                                                      tmp_path):
    """'full' mode: rank 0's gathered iter_3.pth resumes to the same paths and weights as the uninterrupted run."""
    first = tmp_path / 'first'
    train(first, tiny_cityscapes, teacher, 'train_cfg.max_iters=3', 'default_hooks.checkpoint.interval=3')
    resumed_dir = tmp_path / 'resumed'
    resumed_dir.mkdir()
    shutil.copy(first / 'iter_3.pth', resumed_dir / 'iter_3.pth')
    (resumed_dir / 'last_checkpoint').write_text(str(resumed_dir / 'iter_3.pth'))
    train(resumed_dir, tiny_cityscapes, teacher, 'train_cfg.max_iters=6', 'default_hooks.checkpoint.interval=3',
          resume=True)
    for rank in (0, 1):
        assert read_paths(resumed_dir, rank) == {i: read_paths(sharded_run, 0)[i] for i in range(3, 6)}
    resumed, uninterrupted = weights(resumed_dir / 'iter_6.pth'), weights(sharded_run / 'iter_6.pth')
    assert resumed.keys() == uninterrupted.keys()
    for key, value in uninterrupted.items():
        assert torch.allclose(resumed[key], value, rtol=1e-5, atol=1e-6), key


def test_max_keep_ckpts_removes_the_shards_with_their_file(tiny_cityscapes, teacher, tmp_path):
    """mmengine's max_keep_ckpts removes an old iter_N.pth; its iter_N.dcp folder goes with it (it cannot be loaded
    without the file), and a folder of the user's own is left alone."""
    (tmp_path / 'notes.dcp').mkdir()
    train(tmp_path, tiny_cityscapes, teacher, 'train_cfg.max_iters=3', 'default_hooks.checkpoint.interval=1',
          'default_hooks.checkpoint.max_keep_ckpts=1', 'model_wrapper_cfg.checkpoint=sharded')
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix in ('.pth', '.dcp')) == [
        'iter_3.dcp', 'iter_3.pth', 'notes.dcp']
    assert weights(tmp_path / 'iter_3.pth')  # the kept checkpoint still loads, shards verified


def test_meta_init_trains_from_the_same_weights(tiny_cityscapes, teacher, tmp_path):
    """``model_wrapper_cfg.meta_init=True``: tools/train.py builds the distiller on the meta device and loads each
    rank's shard; the first step's loss is the one of the full build (the weights are the teacher's; the L kernel
    generators' random first layer has no effect before the first update, their last layer starting at zero)."""
    losses = {}
    for meta in (True, False):
        log = train(tmp_path / str(meta), tiny_cityscapes, teacher, 'train_cfg.max_iters=1',
                    'default_hooks.logger.interval=1', f'model_wrapper_cfg.meta_init={meta}')
        assert ('built on the meta device' in log) == meta
        losses[meta] = re.search(r'Iter\(train\) \[1/1\].*? loss: ([0-9.]+)', log).group(1)
    assert losses[True] == losses[False]
