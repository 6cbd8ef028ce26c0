"""A search's inputs are identified by content: the supernet's and the head's tensors, the evaluation protocol and
the val set's file list. A resumed search refuses a changed input, naming it, and accepts the same files moved."""
import shutil

import pytest
import torch
from mmengine.config import Config

import jetvit_mm.mm  # noqa: F401  (registers the datasets and the loader)
from jetvit_mm.mm.search.identity import (
    IDENTITY_NAMES,
    agreed_identity,
    search_identity,
    state_fingerprint,
    val_content_fingerprint,
    val_files_fingerprint,
    val_protocol_fingerprint,
)
from jetvit_mm.search.run import open_state

from .conftest import REPO

PROBE = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'


def probe_config(root) -> Config:
    cfg = Config.fromfile(str(PROBE))
    cfg.merge_from_dict({'val_dataloader.dataset.data_root': str(root)})
    return cfg


def test_checkpoint_fingerprint_is_its_tensors_not_its_path_or_format(tmp_path):
    state = {'student.w': torch.arange(6.).reshape(2, 3), 'teacher.w': torch.ones(3)}
    torch.save({'state_dict': state, 'meta': {'iter': 4}}, tmp_path / 'a.pth')
    torch.save({'state_dict': state, 'optimizer': {'lr': 1.}, 'meta': {'iter': 9}}, tmp_path / 'b.pth',
               _use_new_zipfile_serialization=False)
    shutil.copy(tmp_path / 'a.pth', tmp_path / 'moved.pth')
    fingerprints = {state_fingerprint(str(tmp_path / name)) for name in ('a.pth', 'b.pth', 'moved.pth')}
    assert len(fingerprints) == 1
    torch.save({'state_dict': dict(state, **{'student.w': torch.zeros(2, 3)})}, tmp_path / 'a.pth')  # replaced
    assert state_fingerprint(str(tmp_path / 'a.pth')) not in fingerprints
    assert state_fingerprint(None) is None


def test_val_set_fingerprints_follow_content_not_location(tiny_cityscapes, tmp_path):
    moved = shutil.copytree(tiny_cityscapes, tmp_path / 'moved')
    here, there = probe_config(tiny_cityscapes), probe_config(moved)
    assert val_files_fingerprint(here) == val_files_fingerprint(there)
    assert val_protocol_fingerprint(here) == val_protocol_fingerprint(there)
    # another val set: one image fewer
    image = sorted((moved / 'leftImg8bit' / 'val').rglob('*.png'))[0]
    label = next((moved / 'gtFine' / 'val').rglob(image.name.replace('leftImg8bit', 'gtFine_labelTrainIds')))
    image.unlink()
    label.unlink()
    assert val_files_fingerprint(there) != val_files_fingerprint(here)
    # another protocol: the evaluator or the val pipeline
    other = probe_config(tiny_cityscapes)
    other.merge_from_dict({'val_evaluator.iou_metrics': ['mIoU', 'mDice']})
    assert val_protocol_fingerprint(other) != val_protocol_fingerprint(here)


def test_val_content_fingerprint_reads_the_bytes_not_the_names_or_sizes(tiny_cityscapes, tmp_path):
    """What ranks compare besides the recorded identity: a val set with the same names and sizes but other bytes
    differs (the file list does not see it), the same bytes elsewhere do not."""
    moved = shutil.copytree(tiny_cityscapes, tmp_path / 'moved')
    here, there = probe_config(tiny_cityscapes), probe_config(moved)
    assert val_content_fingerprint(here) == val_content_fingerprint(there)
    image = sorted((moved / 'leftImg8bit' / 'val').rglob('*.png'))[0]
    data = bytearray(image.read_bytes())
    data[-20] ^= 1  # one bit of the last chunk: the same size
    image.write_bytes(bytes(data))
    assert val_files_fingerprint(there) == val_files_fingerprint(here)
    assert val_content_fingerprint(there) != val_content_fingerprint(here)


def test_ranks_differences_name_each_rank_and_field():
    """In one process the identity is computed and nothing is compared; the comparison of gathered identities (what
    every rank runs alike on the same gathered list) names each differing rank and field."""
    from jetvit_mm.mm.search.identity import _differences
    assert agreed_identity(lambda: {'metric': 'mIoU'}, lambda: 1 / 0) == {'metric': 'mIoU'}
    same = {'val_files': 'a', 'supernet': 's', 'option.beam_width': 4}
    gathered = [(same, None), (same, None), (dict(same, val_files='b', **{'option.beam_width': 2}), None)]
    assert _differences(gathered) == [
        "rank 2's val_files (the val set's file list (names under data_root and sizes)) differs from rank 0's: rank 0 "
        "a, rank 2 b",
        "rank 2's option.beam_width (the search option beam_width) differs from rank 0's: rank 0 4, rank 2 2"]


def test_resume_refuses_a_changed_input_naming_it(tiny_cityscapes, tmp_path):
    state = tmp_path / 'search_state.json'
    torch.save({'state_dict': {'student.w': torch.ones(2)}}, tmp_path / 'supernet.pth')
    identity = search_identity(probe_config(tiny_cityscapes), 'mIoU', str(tmp_path / 'supernet.pth'), None)
    from jetvit_mm.search.state import write_json_atomic
    opened = open_state(state, 1, identity, resume=False)
    opened['stages']['1'] = dict(identity, scores={'LLLL': 1.0})
    write_json_atomic(state, opened)
    # the same file under another path and the val set moved: accepted
    shutil.copy(tmp_path / 'supernet.pth', tmp_path / 'copy.pth')
    moved = shutil.copytree(tiny_cityscapes, tmp_path / 'moved')
    same = search_identity(probe_config(moved), 'mIoU', str(tmp_path / 'copy.pth'), None)
    assert open_state(state, 1, same, resume=True, names=IDENTITY_NAMES)['stages']['1']['scores'] == {'LLLL': 1.0}
    # the supernet file replaced at the same path
    torch.save({'state_dict': {'student.w': torch.zeros(2)}}, tmp_path / 'supernet.pth')
    changed = search_identity(probe_config(tiny_cityscapes), 'mIoU', str(tmp_path / 'supernet.pth'), None)
    with pytest.raises(ValueError, match="changed: the supernet checkpoint's tensors: saved sha256:"):
        open_state(state, 1, changed, resume=True, names=IDENTITY_NAMES)
    # another val set
    next((moved / 'leftImg8bit' / 'val').rglob('*.png')).unlink()
    other = search_identity(probe_config(moved), 'mIoU', str(tmp_path / 'copy.pth'), None)
    with pytest.raises(ValueError, match="changed: the val set's file list") as error:
        open_state(state, 1, other, resume=True, names=IDENTITY_NAMES)
    assert 'supernet' not in str(error.value).split('changed:')[1]  # only what changed is named


def test_a_stage_that_scored_nothing_does_not_block_the_next_run(tmp_path):
    """A run that failed after writing its state but before scoring anything (a late argument error) leaves
    nothing that blocks the corrected command; a stage with scores still needs --resume."""
    from jetvit_mm.search.state import write_json_atomic
    state = tmp_path / 'search_state.json'
    write_json_atomic(state, dict(version=2, stages={'1': dict(metric='mIoU', scores={}, teacher_score=1.)}))
    assert open_state(state, 1, dict(metric='mIoU'), resume=False)['stages'] == {}
    write_json_atomic(state, dict(version=2, stages={'1': dict(metric='mIoU', scores={'LL': 1.})}))
    with pytest.raises(FileExistsError, match='pass --resume'):
        open_state(state, 1, dict(metric='mIoU'), resume=False)
    state.write_text('{"version": 2}')
    with pytest.raises(ValueError, match='search_state.json is not a search state'):
        open_state(state, 1, dict(metric='mIoU'), resume=True)


# ----------------------------------------------------------------------------- every input that changes a score
def saved_search(path, identity) -> None:
    """A step-1 search state that scored one arch with the inputs ``identity``."""
    from jetvit_mm.search.state import write_json_atomic
    opened = open_state(path, 1, identity, resume=False)
    opened['stages']['1'] = dict(identity, scores={'LLLL': 1.0})
    write_json_atomic(path, opened)


def refused_naming(path, identity) -> str:
    """What a resume with ``identity`` names as changed (it must be refused)."""
    with pytest.raises(ValueError, match='Resuming would mix scores of different inputs') as error:
        open_state(path, 1, identity, resume=True, names=IDENTITY_NAMES)
    return str(error.value).split('changed: ')[1]


@pytest.mark.parametrize('change, named', [
    ({'model.test_cfg': dict(mode='slide', crop_size=(64, 64), stride=(32, 32))}, 'model.test_cfg'),
    ({'model.data_preprocessor.size': None, 'model.data_preprocessor.size_divisor': 32}, 'model.data_preprocessor'),
    ({'model.data_preprocessor.std': [1., 1., 1.]}, 'model.data_preprocessor'),
    ({'model.decode_head.align_corners': True}, 'model.decode_head'),
    ({'model.backbone.mixers.W.window_size': 2}, 'model.backbone'),
], ids=['test_cfg', 'size_divisor', 'normalisation', 'head', 'backbone'])
def test_resume_refuses_another_inference_protocol_naming_it(tiny_cityscapes, tmp_path, change, named):
    """The model config's parts that change a score (whole -> slide inference, the data preprocessor, the head, the
    backbone the supernet is built as) are part of a search's identity; the val set and the checkpoints are not
    changed here, so only the changed part is named."""
    state = tmp_path / 'search_state.json'
    torch.save({'state_dict': {'student.w': torch.ones(2)}}, tmp_path / 'supernet.pth')
    saved_search(state, search_identity(probe_config(tiny_cityscapes), 'mIoU', str(tmp_path / 'supernet.pth'), None))
    cfg = probe_config(tiny_cityscapes)
    cfg.merge_from_dict(change)
    what = refused_naming(state, search_identity(cfg, 'mIoU', str(tmp_path / 'supernet.pth'), None))
    assert named in what and ';' not in what, what  # only it


def test_resume_refuses_another_metric_direction(tiny_cityscapes, tmp_path):
    """The same metric name with the other direction (the metric class's declaration edited between two runs)
    would rank the resumed scores the other way round."""
    from mmengine.evaluator import BaseMetric

    from jetvit_mm.mm.registry import METRICS

    def declare(higher: bool) -> None:
        class SearchIdentityToyMetric(BaseMetric):
            higher_is_better = {'toy': higher}

            def process(self, data_batch, data_samples):
                pass

            def compute_metrics(self, results):
                return {'toy': 0.}

        METRICS.register_module(module=SearchIdentityToyMetric, force=True)

    state = tmp_path / 'search_state.json'
    torch.save({'state_dict': {'student.w': torch.ones(2)}}, tmp_path / 'supernet.pth')
    cfg = probe_config(tiny_cityscapes)
    cfg.val_evaluator = dict(type='SearchIdentityToyMetric')
    declare(True)
    saved_search(state, search_identity(cfg, 'toy', str(tmp_path / 'supernet.pth'), None))
    declare(False)
    what = refused_naming(state, search_identity(cfg, 'toy', str(tmp_path / 'supernet.pth'), None))
    assert "the metric's direction (higher_is_better" in what and 'saved True, now False' in what
    assert ';' not in what, what


def test_resume_of_a_distill_loss_search_follows_the_supernet_file_not_only_its_tensors(tiny_cityscapes, tmp_path):
    """``--metric distill_loss`` scores with the objective the supernet checkpoint's saved config names: the same
    tensors with another objective are another search; what only a head uses (test_cfg) is not part of it."""
    state = tmp_path / 'search_state.json'
    weights = {'student.w': torch.ones(2), 'teacher.w': torch.zeros(2)}

    def supernet(loss: str) -> str:
        path = tmp_path / f'supernet_{loss}.pth'
        torch.save({'state_dict': weights, 'meta': {'cfg': f"model = dict(type='FeatureDistiller', loss='{loss}')"}},
                   path)
        return str(path)

    cfg = probe_config(tiny_cityscapes)
    saved_search(state, search_identity(cfg, 'distill_loss', supernet('mse'), None))
    cfg.merge_from_dict({'model.test_cfg': dict(mode='slide', crop_size=(64, 64), stride=(32, 32))})
    same = search_identity(cfg, 'distill_loss', supernet('mse'), None)
    assert open_state(state, 1, same, resume=True, names=IDENTITY_NAMES)['stages']['1']['scores'] == {'LLLL': 1.0}
    other = search_identity(cfg, 'distill_loss', supernet('cosine'), None)
    assert other['supernet'] == same['supernet']  # the same tensors
    what = refused_naming(state, other)
    assert 'the distillation objective --metric distill_loss scores with' in what and ';' not in what
