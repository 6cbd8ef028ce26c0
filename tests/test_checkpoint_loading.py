"""The one mechanism that loads runner checkpoints keeps torch's weights-only unpickler."""
import os
import pickle

import pytest
import torch
from mmengine.logging import HistoryBuffer
from mmengine.runner.checkpoint import CheckpointLoader

from jetvit_mm.mm import enable_runner_checkpoint_loading, load_local_checkpoint


class _Exploit:
    def __reduce__(self):
        return (os.system, ('echo pwned',))


class _AttributeGrab:
    def __reduce__(self):
        return (getattr, (HistoryBuffer, '__subclasses__'))


def test_history_buffer_round_trip(tmp_path):
    buffer = HistoryBuffer()
    for value in (1.0, 3.0):
        buffer.update(value)
    torch.save({'message_hub': {'loss': buffer}, 'w': torch.ones(2)}, tmp_path / 'ckpt.pth')
    with pytest.raises(pickle.UnpicklingError):  # torch's default refuses it ...
        torch.load(tmp_path / 'ckpt.pth')
    loaded = load_local_checkpoint(str(tmp_path / 'ckpt.pth'))  # ... the runner loader accepts it
    assert loaded['message_hub']['loss'].mean() == 2.0 and torch.equal(loaded['w'], torch.ones(2))


@pytest.mark.parametrize('payload', [_Exploit(), _AttributeGrab()], ids=['os.system', 'getattr'])
def test_arbitrary_globals_still_refused(tmp_path, payload):
    path = tmp_path / 'evil.pth'
    torch.save({'x': payload}, path)
    with pytest.raises((pickle.UnpicklingError, RuntimeError)):
        load_local_checkpoint(str(path))


def test_enable_routes_mmengine_local_loader():
    enable_runner_checkpoint_loading()
    assert CheckpointLoader._get_checkpoint_loader('work_dirs/x/iter_4.pth') is load_local_checkpoint
    assert CheckpointLoader._get_checkpoint_loader('https://x/y.pth') is not load_local_checkpoint


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match='nope.pth'):
        load_local_checkpoint(str(tmp_path / 'nope.pth'))


@pytest.mark.parametrize('payload', [_Exploit(), _AttributeGrab()], ids=['os.system', 'getattr'])
def test_backbone_weight_reader_refuses_arbitrary_globals(tmp_path, payload):
    """JetViT's checkpoint reader retries a refused file with the runner allow-list only: still weights-only."""
    from jetvit_mm.models.checkpoints import read_checkpoint
    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': {'w': torch.ones(1)}, 'x': payload}, path)
    with pytest.raises((pickle.UnpicklingError, RuntimeError)):
        read_checkpoint(path)


def test_backbone_weight_reader_reads_runner_checkpoints(tmp_path):
    from jetvit_mm.models.checkpoints import read_checkpoint
    buffer = HistoryBuffer()
    buffer.update(1.0)
    torch.save({'meta': {'iter': 4}, 'state_dict': {'w': torch.ones(2)}, 'message_hub': {'loss': buffer}},
               tmp_path / 'iter_4.pth')
    state, meta = read_checkpoint(tmp_path / 'iter_4.pth')
    assert meta == {'iter': 4} and torch.equal(state['w'], torch.ones(2))
