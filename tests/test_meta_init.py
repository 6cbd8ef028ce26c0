"""Meta-device construction under FSDP2 (issue #32 item 3), 2 gloo processes under torchrun: a distiller (teacher
from a checkpoint, supernet student on its weights; depth 8, dim 384) built on the meta device, sharded, then each
rank's shard loaded, holds the same weights as today's path (every rank builds and loads the whole model, then
shards) and, while it is built and loaded, no rank's peak resident memory exceeds its shard + one block + 20 %, the
figure the memory planner predicts (:func:`~jetvit_mm.benchmark.planner.build_load_bytes`).

Why peak RSS: it is what the process holds (anonymous memory and the checkpoint's mapped pages alike), a count of
pages that does not depend on how busy the machine is; the worker resets the peak mark just before the build.
On a 2-core Xeon: meta path ~100 MB per rank against a planner figure of ~92 MB (shard ~80 MB + the largest block
~12 MB); today's path ~180 MB."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from jetvit_mm.benchmark.memory import MMAP_THRESHOLD
from jetvit_mm.benchmark.planner import build_load_bytes, count_params
from jetvit_mm.distill.fsdp2 import shard_units
from jetvit_mm.mm.models.distiller import build_on_meta
from jetvit_mm.models.jetvit import JetViT
from tests import meta_init_worker

from .conftest import HANG_GUARD_S

REPO = Path(__file__).resolve().parents[1]
WORLD = 2


def torchrun(*args: str) -> None:
    exe = Path(sys.executable).with_name('torchrun')
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1', PYTHONPATH=str(REPO),
               MALLOC_MMAP_THRESHOLD_=str(MMAP_THRESHOLD))
    cmd = [str(exe), '--standalone', f'--nproc_per_node={WORLD}', *args]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp('meta_init')
    torch.manual_seed(3)
    checkpoint = out / 'teacher.pth'
    torch.save(JetViT(**meta_init_worker.BACKBONE).state_dict(), checkpoint)
    results = {}
    for mode in ('meta', 'full'):
        torchrun(str(REPO / 'tests' / 'meta_init_worker.py'), str(out), mode, str(checkpoint))
        ranks = [json.loads((out / f'{mode}_{r}.json').read_text()) for r in range(WORLD)]
        results[mode] = dict(ranks=ranks, **torch.load(out / f'{mode}.pt', weights_only=True))
    model = build_on_meta(meta_init_worker.config(str(checkpoint)))  # nothing read, nothing allocated
    params = count_params(model, shard_units(model), list(model.student.blocks))
    new = {f'student.{n}' for n in model.student.new_parameter_names()}
    return results, params, new


@pytest.mark.integration
def test_meta_init_loads_what_the_full_build_loads(runs):
    results, _, new = runs
    meta, full = results['meta'], results['full']
    assert meta['state'].keys() == full['state'].keys()
    assert set(meta['initialised']) == new and new  # the L candidates' kernel generators: in no checkpoint
    assert full['initialised'] == []
    for key, value in full['state'].items():
        if key not in new:
            assert torch.equal(meta['state'][key], value), key  # bit-identical
        else:  # the module's own init, seeded by name: zero where it is zero, random where it is random
            assert meta['state'][key].shape == value.shape and torch.isfinite(meta['state'][key]).all()
            assert (meta['state'][key] == 0).all() == (value == 0).all(), key


@pytest.mark.integration
def test_meta_init_peak_per_rank_is_a_shard_plus_one_block(runs):
    results, params, _ = runs
    planned = build_load_bytes(params, WORLD)
    unit = 4 * params.largest_unit
    for rank, measured in enumerate(results['meta']['ranks']):
        assert abs(measured['shard'] - (planned - unit)) <= 0.01 * planned  # the planner's shard is the real one
        assert measured['peak'] <= 1.2 * (measured['shard'] + unit), (rank, measured, unit)
        assert measured['peak'] <= 1.2 * planned, (rank, measured['peak'], planned)
    for rank, measured in enumerate(results['full']['ranks']):  # today's path: the whole model on every rank
        assert measured['peak'] > 1.2 * planned, (rank, measured['peak'], planned)
