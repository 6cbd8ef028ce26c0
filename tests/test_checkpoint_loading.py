"""The one mechanism that loads runner checkpoints keeps torch's weights-only unpickler."""
import os
import pickle

import pytest
import torch
from mmengine.logging import HistoryBuffer

import jetvit_mm.mm  # noqa: F401  (the runner checkpoint's data types allowed)
from jetvit_mm.models.arch import SPEC_KEY
from jetvit_mm.models.checkpoint import read


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
    loaded = read(str(tmp_path / 'ckpt.pth')).raw  # the core's read accepts it ...
    assert loaded['message_hub']['loss'].mean() == 2.0 and torch.equal(loaded['w'], torch.ones(2))
    # ... and, the plugin imported, torch's own weights-only load (what mmengine's loader calls)
    assert torch.load(tmp_path / 'ckpt.pth', weights_only=True)['message_hub']['loss'].mean() == 2.0


@pytest.mark.parametrize('payload', [_Exploit(), _AttributeGrab()], ids=['os.system', 'getattr'])
def test_arbitrary_globals_still_refused(tmp_path, payload):
    path = tmp_path / 'evil.pth'
    torch.save({'x': payload}, path)
    with pytest.raises((pickle.UnpicklingError, RuntimeError)):
        read(str(path))


def test_runner_loads_through_the_core_reader(tmp_path, monkeypatch):
    """JetViTRunner's load (``load_from``, ``--resume``) reads with the core's read, not mmengine's loaders (left as
    they are): a runner checkpoint with HistoryBuffers loads weights-only, its config text literal-only, its message
    hub back as HistoryBuffers; a URL (a model zoo's ``load_from``) is read from its copy in torch's hub cache, fetched
    once; a scheme it cannot fetch is refused naming those it can."""
    from mmengine.runner.checkpoint import CheckpointLoader

    from jetvit_mm.mm.engine.runner import JetViTRunner

    schemes = dict(CheckpointLoader._schemes)
    buffer = HistoryBuffer()
    buffer.update(2.0)
    torch.save({'state_dict': {'weight': torch.ones(2, 2), 'bias': torch.zeros(2)}, 'message_hub': {'loss': buffer},
                'meta': {'config': "a = 1\nimport os\n"}}, tmp_path / 'iter_1.pth')
    runner = JetViTRunner(model=torch.nn.Linear(2, 2), work_dir=str(tmp_path / 'work'))
    with pytest.warns(UserWarning, match='never run'):
        loaded = runner.load_checkpoint(str(tmp_path / 'iter_1.pth'))
    assert torch.equal(runner.model.weight, torch.ones(2, 2)) and loaded['meta']['config'] == 'a = 1\n'
    assert loaded['message_hub']['loss'].mean() == 2.0 and CheckpointLoader._schemes == schemes
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch'))
    torch.nn.init.zeros_(runner.model.weight)
    with pytest.warns(UserWarning, match='never run'):
        runner.load_checkpoint((tmp_path / 'iter_1.pth').as_uri())
    assert torch.equal(runner.model.weight, torch.ones(2, 2))
    copy = tmp_path / 'torch' / 'hub' / 'checkpoints' / 'iter_1.pth'
    assert copy.read_bytes() == (tmp_path / 'iter_1.pth').read_bytes()
    with pytest.raises(ValueError, match=r'http://, https:// or file:// URL, not s3://'):
        runner.load_checkpoint('s3://bucket/iter_1.pth')


def pickled_globals(path) -> list:
    """The globals a torch zip checkpoint's pickle names (``'module name'``)."""
    import pickletools
    import zipfile

    with zipfile.ZipFile(path) as archive:
        data = archive.read(next(n for n in archive.namelist() if n.endswith('data.pkl')))
    return [str(arg) for op, arg, _ in pickletools.genops(data) if op.name == 'GLOBAL']


def test_runner_state_is_saved_as_plain_data_and_restored(tmp_path):
    """The checkpoint hook's conversion: the message hub (HistoryBuffers, a numpy ETA) saved so that a plain
    weights-only ``torch.load`` reads it, and restored to the same statistics for mmengine's MessageHub. An old
    config declares the hook twice (``PlainCheckpointHook``, its former half, beside ``CheckpointDigestHook``): the
    second run changes nothing."""
    import copy

    import numpy as np
    from mmengine.logging import MessageHub
    from mmengine.registry import HOOKS

    from jetvit_mm.mm.checkpoint import CheckpointDigestHook
    from jetvit_mm.models.checkpoint.integrity import DIGEST_META_KEY, tensor_digest

    old, new = HOOKS.build(dict(type='PlainCheckpointHook')), HOOKS.build(dict(type='CheckpointDigestHook'))
    assert type(old) is type(new) is CheckpointDigestHook and new.priority == 'LOWEST'
    hub = MessageHub.get_instance('plain_state_test')
    for i in range(3):
        hub.update_scalar('train/loss', float(i) / 3, count=2)
    hub.update_info('eta', np.float64(1.5))
    checkpoint = {'message_hub': hub.state_dict(), 'state_dict': {'w': torch.ones(2)}}
    torch.save(checkpoint, tmp_path / 'raw.pth')
    assert any('HistoryBuffer' in name for name in pickled_globals(tmp_path / 'raw.pth'))
    old.before_save_checkpoint(None, checkpoint)
    once = copy.deepcopy(checkpoint)
    new.before_save_checkpoint(None, checkpoint)
    assert checkpoint['message_hub'] == once['message_hub'] and checkpoint['meta'] == once['meta']
    assert checkpoint['meta'][DIGEST_META_KEY] == tensor_digest(checkpoint)
    torch.save(checkpoint, tmp_path / 'plain.pth')
    assert not any(name.startswith(('mmengine', 'numpy')) for name in pickled_globals(tmp_path / 'plain.pth'))
    loaded = torch.load(tmp_path / 'plain.pth', weights_only=True)
    for hook in (old, new):
        hook.after_load_checkpoint(None, loaded)
    restored = MessageHub.get_instance('plain_state_restored')
    restored.load_state_dict(loaded['message_hub'])
    before, after = hub.get_scalar('train/loss'), restored.get_scalar('train/loss')
    assert isinstance(after, HistoryBuffer)
    assert after.data[0].tolist() == before.data[0].tolist() and after.data[1].tolist() == before.data[1].tolist()
    assert after.mean() == before.mean() and restored.get_info('eta') == 1.5


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match='nope.pth'):
        read(str(tmp_path / 'nope.pth'))


@pytest.mark.parametrize('payload', [_Exploit(), _AttributeGrab()], ids=['os.system', 'getattr'])
def test_backbone_weight_reader_refuses_arbitrary_globals(tmp_path, payload):
    """JetViT's checkpoint reader allows the runner's data types only: still weights-only."""
    from jetvit_mm.models.checkpoint import read
    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': {'w': torch.ones(1)}, 'x': payload}, path)
    with pytest.raises((pickle.UnpicklingError, RuntimeError)):
        read(path)


def test_backbone_weight_reader_reads_runner_checkpoints(tmp_path):
    from jetvit_mm.models.checkpoint import read
    buffer = HistoryBuffer()
    buffer.update(1.0)
    torch.save({'meta': {'iter': 4}, 'state_dict': {'w': torch.ones(2)}, 'message_hub': {'loss': buffer}},
               tmp_path / 'iter_4.pth')
    checkpoint = read(tmp_path / 'iter_4.pth')
    state, meta = checkpoint.state, checkpoint.meta
    assert meta == {'iter': 4} and torch.equal(state['w'], torch.ones(2))


# ---------------------------------------------------------------------------- the config text saved in a checkpoint
TINY_VIT = dict(model_name='dinov3_vits16', depth=2, embed_dim=64, num_heads=4)


def _runner_checkpoint(path, state, cfg_text):
    torch.save({'state_dict': state, 'meta': {'cfg': cfg_text, 'iter': 1}}, path)
    return path


def _old_backbone_state(model):
    """``backbone.*`` weights as checkpoints written before arch specs held them: no ``_extra_state``."""
    return {f'backbone.{k}': v for k, v in model.state_dict().items() if k != SPEC_KEY}


def test_saved_config_text_is_never_executed_nor_read_for_the_arch(tmp_path):
    """A runner checkpoint's ``meta['cfg']`` is untrusted text: loading its weights runs nothing of it, and the arch
    is read from the state dict alone (a file without a spec loads as any spec-less weights do)."""
    from jetvit_mm.models import JetViT
    marker = tmp_path / 'ran'
    state = _old_backbone_state(JetViT(arch='WF', **TINY_VIT))
    text = (f"_x = open({str(marker)!r}, 'w').write('ran')\n"
            "_y = dict(window_size=__import__('os').getpid())\n"
            "model = dict(type='EncoderDecoder', backbone=dict(type='JetViT', arch='WF', depth=2, out_indices=(1, ),\n"
            "    linear_cfg=dict(conv='squeeze'), drop_path_rate=-0.1))\n")
    path = tmp_path / 'iter_1.pth'
    for saved in (text, 'model = dict(\n'):  # also an unparsable one
        _runner_checkpoint(path, state, saved)
        model = JetViT(arch='WF', checkpoint=path, **TINY_VIT)
        assert torch.equal(model.blocks[1].attn.qkv.weight, state['backbone.blocks.1.attn.qkv.weight'])
        assert not marker.exists()


def test_all_full_runner_checkpoint_loads_into_a_hybrid(tmp_path):
    """An all-F checkpoint is the teacher: every arch inherits it, whether its state dict names the arch or holds no
    spec."""
    from jetvit_mm.models import JetViT
    teacher = JetViT(arch='FF', **TINY_VIT)
    for state in (_old_backbone_state(teacher), {f'backbone.{k}': v for k, v in teacher.state_dict().items()}):
        path = _runner_checkpoint(tmp_path / 'iter_1.pth', state, "model = dict(backbone=dict(type='JetViT', "
                                  "arch='FF'))")
        hybrid = JetViT(arch='LW', checkpoint=path, **TINY_VIT)
        assert torch.equal(hybrid.blocks[1].attn.qkv.weight, teacher.blocks[1].attn.qkv.weight)


def test_supernet_lists_layers_it_lacks(tmp_path):
    from jetvit_mm.models import JetViT
    from jetvit_mm.models.supernet import JetViTSupernet
    deeper = dict(TINY_VIT, depth=3)
    torch.save(JetViT(**deeper).state_dict(), tmp_path / 'deep.pth')
    with pytest.raises(RuntimeError, match=r'unexpected keys: blocks\.2\.'):
        JetViTSupernet(checkpoint=tmp_path / 'deep.pth', **TINY_VIT)


def test_unreadable_file_is_named_with_the_reason(tmp_path):
    """A truncated checkpoint or a text file named .pth: an error naming the file, not torch's internals."""
    good = tmp_path / 'good.pth'
    torch.save({'state_dict': {'w': torch.zeros(4096)}}, good)
    (tmp_path / 'truncated.pth').write_bytes(good.read_bytes()[:2000])
    (tmp_path / 'text.pth').write_text('not a checkpoint')
    for name in ('truncated.pth', 'text.pth'):
        with pytest.raises(ValueError, match=f'{name} is not a readable torch checkpoint'):
            read(str(tmp_path / name))
