"""tools/train.py and tools/test.py on generated Cityscapes data with an mmseg config using the plugin."""
import contextlib
import json
import re
from pathlib import Path

import pytest
import torch

from jetvit_mm.models.arch import SPEC_KEY, ArchSpec
from jetvit_mm.models.checkpoint import read

from .conftest import HANG_GUARD_S, REPO, run_tool

CONFIG = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'


@pytest.fixture(scope='module')
def trained(tiny_cityscapes, tmp_path_factory):
    """Train 4 iterations (checkpoints at 2 and 4)."""
    work_dir = tmp_path_factory.mktemp('work')
    proc = run_tool('train.py', CONFIG, '--work-dir', work_dir, *data_options(tiny_cityscapes))
    return work_dir, proc


def data_options(root: Path) -> list:
    return ['--cfg-options'] + [f'{split}_dataloader.dataset.data_root={root}' for split in ('train', 'val', 'test')]


@pytest.mark.integration
def test_train_writes_checkpoints_and_validates(trained):
    work_dir, proc = trained
    assert (work_dir / 'iter_2.pth').is_file() and (work_dir / 'iter_4.pth').is_file()
    log = proc.stdout + proc.stderr
    assert re.search(r'Iter\(train\) \[4/4\]', log)
    assert re.search(r'Iter\(val\) .*mIoU: \d', log), 'validation after training reports mIoU'
    ckpt = read(str(work_dir / 'iter_4.pth')).raw
    assert ckpt['meta']['iter'] == 4
    assert any(k.startswith('decode_head.bn.') for k in ckpt['state_dict'])
    # the backbone's arch spec, in the state dict (what loading checks)
    spec = ArchSpec.from_tensor(ckpt['state_dict'][f'backbone.{SPEC_KEY}'])
    assert (spec.arch, spec.mixers['W']['window_size']) == ('LWLF', 4)


@pytest.mark.integration
def test_test_tool_reports_iou_metric(trained, tiny_cityscapes, tmp_path):
    work_dir, _ = trained
    out = tmp_path / 'metrics.json'
    proc = run_tool('test.py', CONFIG, work_dir / 'iter_4.pth', '--work-dir', tmp_path / 'test',
                    '--out', out, *data_options(tiny_cityscapes))
    metrics = json.loads(out.read_text())
    assert set(metrics) == {'aAcc', 'mIoU', 'mAcc'}  # exactly IoUMetric's summary keys
    assert 0 <= metrics['mIoU'] <= 100 and 0 < metrics['aAcc'] <= 100
    log = proc.stdout + proc.stderr
    assert 'per class results' in log and 'Load checkpoint from' in log
    # the per-class table is IoUMetric's: 19 Cityscapes classes
    for name in ('road', 'sidewalk', 'bicycle'):
        assert re.search(rf'\|\s*{name}\s*\|', log)


@pytest.mark.integration
def test_resume_continues_from_saved_iteration(trained, tiny_cityscapes, tmp_path):
    import shutil

    work_dir, _ = trained
    resumed = tmp_path / 'resumed'
    shutil.copytree(work_dir, resumed)
    # a config without a seed takes the checkpoint's (0) before the sampler is built: the same image order
    opts = data_options(tiny_cityscapes) + ['train_cfg.max_iters=6', 'randomness.seed=None']
    proc = run_tool('train.py', CONFIG, '--work-dir', resumed, '--resume', *opts)
    log = proc.stdout + proc.stderr
    assert 'resumed epoch: 0, iter: 4' in log
    assert re.search(r'^\s*seed: 0$', log, re.M), 'the runner starts with the resumed run\'s seed'
    assert re.search(r'Iter\(train\) \[5/6\]', log) and not re.search(r'Iter\(train\) \[[1-4]/6\]', log)
    before = read(str(work_dir / 'iter_4.pth')).raw['state_dict']
    after = read(str(resumed / 'iter_6.pth')).raw
    assert after['meta']['iter'] == 6
    # the resumed run started from iter 4's weights and kept training the head
    assert not torch.equal(before['decode_head.conv_seg.weight'], after['state_dict']['decode_head.conv_seg.weight'])


def test_set_resume_takes_the_checkpoint_seed_when_the_config_has_none(tmp_path):
    from mmengine.config import Config

    from jetvit_mm.mm.engine.launch import set_resume

    ckpt = tmp_path / 'iter_2.pth'
    torch.save({'meta': {'seed': 1234, 'iter': 2}, 'state_dict': {'w': torch.zeros(2)}}, ckpt)
    (tmp_path / 'last_checkpoint').write_text(str(ckpt))
    for resume in (str(ckpt), 'auto'):
        cfg = Config(dict(work_dir=str(tmp_path), randomness=dict(seed=None, deterministic=False)))
        set_resume(cfg, resume)
        assert cfg.resume and cfg.randomness == dict(seed=1234, deterministic=False)
        assert cfg.load_from == (None if resume == 'auto' else str(ckpt))
    kept = Config(dict(work_dir=str(tmp_path), randomness=dict(seed=7)))
    set_resume(kept, 'auto')
    assert kept.randomness.seed == 7  # a seed the user set is the user's
    fresh = Config(dict(work_dir=str(tmp_path / 'empty')))
    set_resume(fresh, 'auto')  # nothing saved yet: starts afresh, no seed invented
    assert fresh.resume and 'randomness' not in fresh
    not_resuming = Config(dict(work_dir=str(tmp_path)))
    set_resume(not_resuming, None)
    assert 'resume' not in not_resuming and 'randomness' not in not_resuming


@pytest.mark.integration
def test_two_process_cpu_probe_training(tiny_cityscapes, tmp_path):
    """torchrun on CPU ranks (gloo): the probe head's BatchNorm must not be SyncBN, which has no CPU kernel."""
    import os
    import subprocess
    import sys

    torchrun = Path(sys.executable).with_name('torchrun')
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1')
    # --standalone: a rendezvous on a free local port (a fixed --master_port collides with any other run using it)
    cmd = [str(torchrun), '--standalone', '--nproc_per_node=2', str(REPO / 'tools' / 'train.py'), str(CONFIG),
           '--launcher', 'pytorch', '--work-dir', str(tmp_path), *data_options(tiny_cityscapes),
           'train_cfg.max_iters=2', 'train_cfg.val_interval=2']
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert re.search(r'Iter\(val\) .*mIoU: \d', proc.stdout + proc.stderr)
    state = read(str(tmp_path / 'iter_2.pth')).raw['state_dict']
    assert 'decode_head.bn.running_mean' in state


@pytest.mark.integration
def test_load_from_runner_checkpoint(trained, tiny_cityscapes, tmp_path):
    work_dir, _ = trained
    opts = data_options(tiny_cityscapes) + [f'load_from={work_dir / "iter_4.pth"}', 'train_cfg.max_iters=1',
                                           'train_cfg.val_interval=100']
    proc = run_tool('train.py', CONFIG, '--work-dir', tmp_path, *opts)
    assert 'Load checkpoint from' in proc.stdout + proc.stderr


@pytest.mark.integration
def test_unknown_type_in_config_names_type_and_registry(tiny_cityscapes, tmp_path):
    opts = data_options(tiny_cityscapes) + ['model.decode_head.type=LinearProbeHeadTypo']
    proc = run_tool('train.py', CONFIG, '--work-dir', tmp_path, *opts, check=False)
    assert proc.returncode == 1 and 'Traceback' not in proc.stderr
    assert "error: config: type='LinearProbeHeadTypo' is not in the mmseg::model registry; registered names " \
        "closest to it: ['LinearProbeHead'" in proc.stderr


@pytest.mark.integration
def test_amp_without_gpu_is_a_clear_error(tiny_cityscapes, tmp_path):
    if torch.cuda.is_available():
        pytest.skip('this checks the CPU-only message')
    proc = run_tool('train.py', CONFIG, '--work-dir', tmp_path, '--amp', *data_options(tiny_cityscapes), check=False)
    assert proc.returncode != 0 and '--amp needs a CUDA device' in proc.stderr


def test_run_main_leaves_without_finalizing_only_after_a_torn_down_group(tmp_path, monkeypatch):
    """tools/train.py, test.py and search.py end in run_main: after a distributed run the process leaves with 0 once
    its logs are flushed (a gloo worker that DDP keeps alive aborts the rank if the interpreter finalizes under
    it); a run without a group and a failing run end as usual."""
    import logging

    from jetvit_mm.cli import run_main
    from jetvit_mm.mm.engine.launch import process_group_teardown

    left, handled = [], []
    monkeypatch.setattr(logging, 'shutdown', lambda: handled.append(True))

    run_main(lambda: None, leave=left.append)
    assert left == [] and handled == []

    def distributed_main():
        torch.distributed.init_process_group('gloo', init_method=f'file://{tmp_path / "rendezvous"}', rank=0,
                                             world_size=1)
        with process_group_teardown():
            torch.distributed.barrier()

    run_main(distributed_main, leave=left.append)
    assert left == [0] and handled == [True] and not torch.distributed.is_initialized()

    def failing_main():
        raise RuntimeError('late failure')

    with pytest.raises(RuntimeError, match='late failure'):
        run_main(failing_main, leave=left.append)
    assert left == [0]


def test_what_the_run_left_unreachable_is_freed_before_the_process_group_goes(tmp_path, monkeypatch):
    """A runner's model in reference cycles (FSDP2's hooks) is collected while the group lives, not at exit (issue 39:
    on the H200 an FSDP2 process sat over 10 s in the exit's garbage collection). The collector is off here, so only
    the teardown's own collection can free it."""
    import gc
    import weakref

    from jetvit_mm.mm.engine.launch import process_group_teardown

    class Model:
        pass

    freed_at_destroy = []
    destroy = torch.distributed.destroy_process_group
    monkeypatch.setattr(torch.distributed, 'destroy_process_group',
                        lambda: (freed_at_destroy.append(ref() is None), destroy()))
    torch.distributed.init_process_group('gloo', init_method=f'file://{tmp_path / "rendezvous"}', rank=0,
                                         world_size=1)
    gc.disable()
    try:
        with process_group_teardown():
            model = Model()
            model.itself = model  # a cycle, as FSDP2's hooks make
            ref = weakref.ref(model)
            del model
        assert freed_at_destroy == [True]
    finally:
        gc.enable()
        if torch.distributed.is_initialized():
            destroy()


@pytest.mark.parametrize('fails', [False, True], ids=['success', 'error'])
def test_process_group_is_torn_down_on_success_and_on_error(tmp_path, fails):
    """What tools/train.py and tools/test.py run in: the process group they (or mmengine) started ends with them."""
    from jetvit_mm.mm.engine.launch import process_group_teardown

    torch.distributed.init_process_group('gloo', init_method=f'file://{tmp_path / "rendezvous"}', rank=0,
                                         world_size=1)
    try:
        with pytest.raises(RuntimeError, match='late failure') if fails else contextlib.nullcontext():
            with process_group_teardown():
                torch.distributed.barrier()
                if fails:
                    raise RuntimeError('late failure')
        assert not torch.distributed.is_initialized()
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
