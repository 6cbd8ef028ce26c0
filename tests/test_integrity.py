"""Integrity of checkpoint files: what the project writes carries a digest of its tensors, checked on every load; a
zip checkpoint's records are CRC-checked; a damaged file is refused and named; legacy (non-zip) torch files load."""
import struct
import zipfile
from pathlib import Path

import pytest
import torch

from jetvit_mm.jsonio import atomic_write
from jetvit_mm.models import JetViT
from jetvit_mm.models.checkpoint import DamagedCheckpointError, read, save, tensor_digest
from jetvit_mm.models.checkpoint.integrity import DIGEST_META_KEY
from jetvit_mm.models.mixers import default_mixers

TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2,
            mixers=default_mixers(W=dict(window_size=2)), arch='LWLF')


def record_data_offset(path: Path, suffix: str) -> int:
    """Where the bytes of the zip record ending with ``suffix`` start in the file."""
    with zipfile.ZipFile(path) as archive:
        info = max((i for i in archive.infolist() if i.filename.endswith(suffix)), key=lambda i: i.file_size)
    with open(path, 'rb') as f:
        f.seek(info.header_offset)
        header = f.read(30)
    name_len, extra_len = struct.unpack('<HH', header[26:30])
    return info.header_offset + 30 + name_len + extra_len


def zero_bytes(path: Path, offset: int, count: int = 64) -> None:
    data = bytearray(path.read_bytes())
    data[offset:offset + count] = bytes(count)
    path.write_bytes(bytes(data))


def backbone_checkpoint(path: Path, legacy: bool = False, digest: bool = True) -> JetViT:
    model = JetViT(**TINY)
    checkpoint = dict(state_dict=model.state_dict(), meta={})
    if digest:
        save(checkpoint, path)
        if legacy:  # the same content in torch's legacy format
            torch.save(checkpoint, path, _use_new_zipfile_serialization=False)
    else:
        torch.save(checkpoint, path, _use_new_zipfile_serialization=not legacy)
    return model


def test_zeroed_bytes_inside_a_tensor_record_are_refused_and_named(tmp_path):
    """The issue's repro: 64 zeroed bytes inside a tensor record loaded silently with a changed weight."""
    path = tmp_path / 'damaged.pth'
    backbone_checkpoint(path, digest=False)  # no digest: the zip CRC alone catches it
    zero_bytes(path, record_data_offset(path, '/data/0') + 16)
    for load in (lambda: JetViT(**TINY, checkpoint=path), lambda: read(path)):
        with pytest.raises(DamagedCheckpointError, match=r'damaged\.pth is damaged: its record .*data/0 fails'):
            load()
    # torch's own reader does not notice; a mapped read (for the meta only, tensors not read) checks the pickle's
    # record only, the full load that follows it in every tool checks the rest
    torch.load(path, weights_only=True)
    read(str(path), mmap=True)
    zero_bytes(path, record_data_offset(path, '/data.pkl') + 8, count=8)
    with pytest.raises(DamagedCheckpointError, match=r'data\.pkl fails the zip check'):
        read(str(path), mmap=True)


def test_digest_catches_what_no_crc_covers(tmp_path):
    """A legacy (non-zip) file has no CRC: the digest written with it refuses changed tensor bytes."""
    path = tmp_path / 'legacy.pth'
    model = backbone_checkpoint(path, legacy=True)
    assert path.read_bytes()[:1] == b'\x80'  # a pickle, not a zip
    JetViT(**TINY, checkpoint=path)  # intact: loads
    weight = model.state_dict()['blocks.3.mlp.fc2.weight'].contiguous().numpy().tobytes()
    data = bytearray(path.read_bytes())
    start = data.find(weight)
    assert start > 0, 'the weight\'s bytes lie in the file as they are'
    data[start + 64:start + 128] = bytes(b ^ 0xFF for b in data[start + 64:start + 128])
    path.write_bytes(bytes(data))
    for load in (lambda: JetViT(**TINY, checkpoint=path), lambda: read(path)):
        with pytest.raises(DamagedCheckpointError, match=r'legacy\.pth is damaged: its tensors do not match'):
            load()


def test_digest_covers_paths_dtypes_shapes_and_bytes():
    base = {'state_dict': {'a': torch.zeros(4), 'b': torch.ones(2, 2)}, 'meta': {'x': 1}}
    same = {'state_dict': {'b': torch.ones(2, 2), 'a': torch.zeros(4)}, 'meta': {'other': 'meta is not covered'}}
    assert tensor_digest(base) == tensor_digest(same)
    changed = [{'state_dict': {'a': torch.zeros(4), 'c': torch.ones(2, 2)}},
               {'state_dict': {'a': torch.zeros(4, dtype=torch.float64), 'b': torch.ones(2, 2)}},
               {'state_dict': {'a': torch.zeros(4), 'b': torch.ones(4)}},
               {'state_dict': {'a': torch.zeros(4), 'b': torch.ones(2, 2) * 2}}]
    assert len({tensor_digest(base), *map(tensor_digest, changed)}) == 5


def test_stale_digest_is_refused(tmp_path):
    """A file whose tensors were changed and saved again without its digest updated (an edit, a bad merge)."""
    path = tmp_path / 'edited.pth'
    checkpoint = save(dict(state_dict={'w': torch.zeros(3)}, meta={}), path) and torch.load(path)
    checkpoint['state_dict']['w'][0] = 1.
    torch.save(checkpoint, path)
    with pytest.raises(DamagedCheckpointError, match='edited.pth is damaged'):
        read(path)
    torch.save(dict(checkpoint, meta={DIGEST_META_KEY: 'md5:0'}), path)
    with pytest.raises(DamagedCheckpointError, match='not a sha256 digest'):
        read(path)


def test_truncated_zip_is_refused_and_named(tmp_path):
    path = tmp_path / 'cut.pth'
    backbone_checkpoint(path)
    path.write_bytes(path.read_bytes()[:-300])
    with pytest.raises(ValueError, match='cut.pth is not a readable torch checkpoint'):
        read(str(path))


def test_legacy_files_load_everywhere_including_mapped_reads(tmp_path):
    """Legacy files without a digest (written by other tools) are valid: the mapped read tools/test.py and
    tools/search.py make of a checkpoint's meta falls back to a full read (torch maps only zip files)."""
    path = tmp_path / 'legacy.pth'
    model = backbone_checkpoint(path, legacy=True, digest=False)
    loaded = read(str(path), mmap=True).raw
    assert torch.equal(loaded['state_dict']['blocks.0.attn.qkv.weight'], model.state_dict()['blocks.0.attn.qkv.weight'])
    JetViT(**TINY, checkpoint=path)


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / 'sub' / 'out.pth'
    target.parent.mkdir()
    target.write_bytes(b'old')

    def fail(f):
        f.write(b'partial')
        raise RuntimeError('disk full')

    with pytest.raises(RuntimeError, match='disk full'):
        atomic_write(target, fail)
    assert target.read_bytes() == b'old' and sorted(p.name for p in target.parent.iterdir()) == ['out.pth']


def test_project_writers_add_the_digest(tmp_path):
    """Exports (tools/export_hybrid.py, tools/convert_depth_anything.py) and runner checkpoints (the save hook)."""
    from jetvit_mm.mm.apis.export import export_hybrid
    from jetvit_mm.mm.checkpoint import CheckpointDigestHook
    from jetvit_mm.models.supernet import JetViTSupernet

    supernet = JetViTSupernet(search_space='LW', **{k: v for k, v in TINY.items() if k != 'arch'})
    paths = export_hybrid(supernet, 'LWLW', tmp_path)
    saved = torch.load(paths['backbone'], weights_only=True)
    assert saved['meta'][DIGEST_META_KEY] == tensor_digest(saved)
    checkpoint = {'state_dict': {'w': torch.ones(2)}, 'meta': {'iter': 2}}
    CheckpointDigestHook().before_save_checkpoint(None, checkpoint)
    assert checkpoint['meta'][DIGEST_META_KEY] == tensor_digest(checkpoint)


# ----------------------------------------------------------------------------- safetensors parsed, never sniffed
def safetensors_starting_with(path: Path, state: dict, head: bytes) -> Path:
    """``state`` saved as safetensors with its metadata padded so that the file starts with ``head`` (2 bytes): a
    safetensors file starts with its header's length, a little-endian u64."""
    from safetensors.torch import save_file

    def header_length(pad: int) -> int:
        save_file(state, str(path), metadata={'pad': 'x' * pad})
        return struct.unpack('<Q', path.read_bytes()[:8])[0]

    low, base = int.from_bytes(head, 'little'), header_length(0)
    length = low + 0x10000 * max(0, -(-(base - low) // 0x10000))  # the first length >= base whose low bytes are head
    for pad in range(max(0, length - base - 16), length - base + 16):
        if header_length(pad) == length:
            return path
    raise AssertionError(f'no padding gives a header of {length} bytes')


@pytest.mark.parametrize('head', [b'\x80\x02', b'PK'], ids=['pickle-protocol-2', 'zip'])
def test_valid_safetensors_whose_header_length_reads_like_a_torch_file_load(tmp_path, head):
    """A safetensors file starts with its header length: a valid file whose length's low byte is 0x80 (here with a
    pickle protocol number after it), or whose two low bytes read 'PK', was refused as a torch checkpoint."""

    model = JetViT(**TINY)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    path = safetensors_starting_with(tmp_path / 'model.safetensors', state, head)
    assert path.read_bytes()[:2] == head
    for loaded in (read(path).state, ):
        assert loaded.keys() == state.keys() and all(torch.equal(loaded[k], v) for k, v in state.items())
    JetViT(**TINY, checkpoint=path)
