"""Weights changed after they were written are refused, naming the file, by every tool that reads a checkpoint:
``tools/infer.py``, ``tools/export_onnx.py``, ``tools/test.py`` and ``tools/search.py``. One byte flipped inside a
tensor record fails the record's zip CRC; a file re-saved with its tensors changed and its old digest in its meta
(a valid zip) fails the tensor digest. Before, infer and export read the weights with mmengine's loader, which checks
neither, and used them (issue 41)."""
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from jetvit_mm.models.checkpoint import DamagedCheckpointError, save

from .conftest import REPO, run_tool
from .test_integrity import record_data_offset

SEG = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'
DAMAGED = r'is damaged'


def _build(config: Path):
    from mmengine.config import Config
    from mmseg.apis import init_model

    import jetvit_mm.mm  # noqa: F401

    torch.manual_seed(0)
    return init_model(Config.fromfile(str(config)), None, device='cpu')


def flip_a_tensor_byte(src: Path, dst: Path) -> Path:
    """``src`` with one byte inside its largest tensor record inverted."""
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as archive:
        record = max((i for i in archive.infolist() if '/data/' in i.filename), key=lambda i: i.file_size)
    offset = record_data_offset(src, record.filename)
    data[offset + record.file_size // 2] ^= 0xFF
    dst.write_bytes(bytes(data))
    return dst


def stale_digest(src: Path, dst: Path) -> Path:
    """``src`` re-saved (a valid zip) with one weight changed and the digest it was written with."""
    raw = torch.load(src, map_location='cpu', weights_only=True)
    state = raw['state_dict']
    key = next(k for k, v in state.items() if v.is_floating_point() and v.numel() > 1)
    state[key] = state[key].clone()
    state[key].view(-1)[0] += 1.
    torch.save(raw, dst)
    return dst


@pytest.fixture(scope='module')
def checkpoints(tmp_path_factory) -> dict:
    """A segmentation probe and a supernet distillation checkpoint (``student.*``, ``teacher.*``) of the tiny probe
    config's backbone, each written with its digest, and each with one tensor byte flipped."""
    from mmengine.config import Config

    from jetvit_mm.mm.search.scoring import backbone_args
    from jetvit_mm.models import JetViT
    from jetvit_mm.models.supernet import JetViTSupernet

    root = tmp_path_factory.mktemp('tampered')
    probe = save({'state_dict': _build(SEG).state_dict(), 'meta': {}}, root / 'probe.pth')
    args = backbone_args(Config.fromfile(str(SEG)))
    student, teacher = JetViTSupernet(search_space='LW', **args), JetViT(**args)
    state = {**{f'student.{k}': v for k, v in student.state_dict().items()},
             **{f'teacher.{k}': v for k, v in teacher.state_dict().items()}}
    supernet = save({'state_dict': state, 'meta': {}}, root / 'supernet.pth')
    return dict(root=root, probe=probe, supernet=supernet,
                probe_flipped=flip_a_tensor_byte(probe, root / 'probe_flipped.pth'),
                supernet_flipped=flip_a_tensor_byte(supernet, root / 'supernet_flipped.pth'))


def _refused(proc, path: Path) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, f'the tool used tampered weights: {out[-2000:]}'
    assert str(path) in out and 'damaged' in out, out[-3000:]


@pytest.mark.integration
def test_infer_refuses_tampered_weights(checkpoints, tmp_path):
    image = tmp_path / 'img.png'
    cv2.imwrite(str(image), np.zeros((32, 48, 3), np.uint8))
    path = checkpoints['probe_flipped']
    proc = run_tool('infer.py', SEG, path, image, '--out-dir', tmp_path / 'out', check=False)
    _refused(proc, path)
    assert not (tmp_path / 'out' / 'img_seg.png').exists()


@pytest.mark.integration
def test_export_onnx_refuses_tampered_weights(checkpoints, tmp_path):
    path = checkpoints['probe_flipped']
    proc = run_tool('export_onnx.py', SEG, path, '--out', tmp_path / 'model.onnx', check=False)
    _refused(proc, path)
    assert not (tmp_path / 'model.onnx').exists()


@pytest.mark.integration
def test_test_tool_refuses_tampered_weights(checkpoints, tiny_cityscapes, tmp_path):
    path = checkpoints['probe_flipped']
    data = [f'{split}_dataloader.dataset.data_root={tiny_cityscapes}' for split in ('train', 'val', 'test')]
    proc = run_tool('test.py', SEG, path, '--work-dir', tmp_path / 'work', '--out', tmp_path / 'metrics.json',
                    '--cfg-options', *data, check=False)
    _refused(proc, path)
    assert not (tmp_path / 'metrics.json').exists()


@pytest.mark.integration
def test_search_tool_refuses_tampered_weights(checkpoints, tiny_cityscapes, tmp_path):
    path = checkpoints['supernet_flipped']
    proc = run_tool('search.py', SEG, path, '--metric', 'distill_loss', '--work-dir', tmp_path / 'search',
                    '--beam-width', '1', '--min-gain', '100', '--latency-size', '64', '128', '--cfg-options',
                    f'val_dataloader.dataset.data_root={tiny_cityscapes}', check=False)
    _refused(proc, path)
    assert not list((tmp_path / 'search').rglob('best_arch*'))


def test_inference_and_export_loads_refuse_a_stale_digest(checkpoints, tmp_path):
    """A valid zip whose tensors no longer match the digest written with them: the tools' full read (the one read of
    the file) checks the digest."""
    from jetvit_mm.mm.apis.infer import load_model
    from jetvit_mm.mm.apis.onnx_model import build_export_module

    path = stale_digest(checkpoints['probe'], tmp_path / 'edited.pth')
    with pytest.raises(DamagedCheckpointError, match=rf'{path}.*{DAMAGED}'):
        load_model(str(SEG), str(path))
    with pytest.raises(DamagedCheckpointError, match=rf'{path}.*{DAMAGED}'):
        build_export_module(str(SEG), str(path))
    module, _ = build_export_module(str(SEG), str(checkpoints['probe']))  # the original loads
    saved = torch.load(checkpoints['probe'], weights_only=True)['state_dict']
    assert torch.equal(module.backbone.blocks[0].attn.qkv.weight, saved['backbone.blocks.0.attn.qkv.weight'])
