"""What a search's state records of its inputs, by content, so that ``tools/search.py --resume`` refuses to mix the
scores of two different supernets, heads or val sets, and accepts the same files under other paths."""
import copy
from typing import Any, Dict, Optional

from mmengine.config import Config
from mmengine.registry import DefaultScope

from jetvit_mm.models.checkpoints import tensor_digest
from jetvit_mm.search.fingerprint import files_by_content, files_by_size, value_digest

from .checkpoint import load_local_checkpoint
from .registry import DATASETS

__all__ = ['IDENTITY_NAMES', 'search_identity', 'state_fingerprint', 'val_files_fingerprint',
           'val_protocol_fingerprint']

# what each identity key is, for the message that names a changed input
IDENTITY_NAMES = {
    'metric': 'the metric (--metric)',
    'supernet': 'the supernet checkpoint\'s tensors',
    'head': 'the head checkpoint\'s tensors (--head-checkpoint)',
    'val_protocol': 'the evaluation protocol (val_dataloader / val_evaluator as resolved, annotation files by '
                    'content)',
    'val_files': 'the val set\'s file list (names under data_root and sizes)',
}


def state_fingerprint(path: Optional[str]) -> Optional[str]:
    """The digest of the tensors of the state dict in the checkpoint ``path`` (None for None): the same weights
    give the same fingerprint in any file, under any path, whatever else (optimizer, meta) the file holds."""
    if path is None:
        return None
    raw = load_local_checkpoint(str(path), map_location='cpu', mmap=True)
    state = raw.get('state_dict', raw) if isinstance(raw, dict) else raw
    return tensor_digest({'state_dict': state})


def val_protocol_fingerprint(cfg: Config) -> str:
    """The digest of the val dataloader and evaluator configs as resolved; a string naming an existing file (an
    annotation file) counts by the file's bytes, one naming a folder (a data root) not at all."""
    protocol = dict(val_dataloader=cfg.get('val_dataloader'), val_evaluator=cfg.get('val_evaluator'))
    return value_digest(files_by_content(Config(copy.deepcopy(protocol)).to_dict()))


def val_files_fingerprint(cfg: Config) -> str:
    """The digest of the val dataset's samples as the dataset lists them, each file by its path under the data root
    and its size (no file is read): another val set differs, the same one moved does not."""
    dataset_cfg = copy.deepcopy(cfg.val_dataloader.dataset)
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope', 'mmseg')):
        dataset = DATASETS.build(dataset_cfg)
    if hasattr(dataset, 'full_init'):
        dataset.full_init()
    root = dataset_cfg.get('data_root') if isinstance(dataset_cfg, dict) else None
    infos = [dataset.get_data_info(i) for i in range(len(dataset))] if hasattr(dataset, 'get_data_info') \
        else [repr(dataset)]
    return value_digest(dict(count=len(infos), samples=files_by_size(infos, root)))


def search_identity(cfg: Config, metric: str, checkpoint: str, head_checkpoint: Optional[str]) -> Dict[str, Any]:
    """The inputs a search's scores depend on, by content (see :data:`IDENTITY_NAMES`)."""
    return dict(metric=metric, supernet=state_fingerprint(checkpoint), head=state_fingerprint(head_checkpoint),
                val_protocol=val_protocol_fingerprint(cfg), val_files=val_files_fingerprint(cfg))
