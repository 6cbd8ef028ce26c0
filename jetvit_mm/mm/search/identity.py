"""What a search's state records of its inputs, by content, so that ``tools/search.py --resume`` refuses to mix the
scores of two different supernets, heads, evaluation protocols (inference mode, data preprocessor, metric and its
direction) or val sets, and accepts the same files under other paths; and what every process of a distributed search
must agree on before any scoring (:func:`agreed_identity`)."""
import copy
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from mmengine.config import Config
from mmengine.dist import all_gather_object, get_world_size
from mmengine.registry import DefaultScope

from jetvit_mm.fingerprints import files_by_content, files_by_size, value_digest
from jetvit_mm.models.checkpoint import Checkpoint, read, tensor_digest

from ..datasets.data_checks import DataInputError, build_checked_dataset
from .scoring import backbone_args, config_metric_direction, saved_distill_objective

__all__ = ['IDENTITY_NAMES', 'RANK_NAMES', 'agreed_identity', 'model_fingerprints', 'search_identity',
           'state_fingerprint', 'val_content_fingerprint', 'val_files_fingerprint', 'val_protocol_fingerprint']

# what each identity key is, for the message that names a changed input
IDENTITY_NAMES = {
    'metric': 'the metric (--metric)',
    'higher_is_better': 'the metric\'s direction (higher_is_better, as the evaluator declares it)',
    'distill_objective': 'the distillation objective --metric distill_loss scores with (loss, loss_cfg and '
                         'distill_indices of the supernet checkpoint\'s saved config)',
    'supernet': 'the supernet checkpoint\'s tensors',
    'head': 'the head checkpoint\'s tensors (--head-checkpoint)',
    'backbone': 'the backbone the supernet is built as (model.backbone: window size, L options, mixers, ...)',
    'head_config': 'the downstream model around the backbone (model type, model.decode_head / auxiliary_head / '
                   'neck / ...)',
    'test_cfg': 'the inference mode (model.test_cfg: whole or slide, crop size, stride)',
    'data_preprocessor': 'the data preprocessor (model.data_preprocessor: normalisation, size divisor, padding)',
    'val_protocol': 'the evaluation protocol (val_dataloader / val_evaluator as resolved, annotation files by '
                    'content)',
    'val_files': 'the val set\'s file list (names under data_root and sizes)',
}
# what the processes of a distributed search compare besides (not recorded: a resumed search does not); the search
# options (tools/search.py's flags) are compared too, each as 'option.<name>'
RANK_NAMES = dict(IDENTITY_NAMES, val_content='the val set\'s files by content (every file\'s bytes)')


def state_fingerprint(checkpoint: Optional[Union[str, Checkpoint]]) -> Optional[str]:
    """The digest of the tensors of the state dict in ``checkpoint`` (a path, or read already; None for None): the
    same weights give the same fingerprint in any file, under any path, whatever else (optimizer, meta) it holds."""
    if checkpoint is None:
        return None
    raw = read(checkpoint, mmap=True).raw
    state = raw.get('state_dict', raw) if isinstance(raw, dict) else raw
    return tensor_digest({'state_dict': state})


def val_protocol_fingerprint(cfg: Config) -> str:
    """The digest of the val dataloader and evaluator configs as resolved; a string naming an existing file (an
    annotation file) counts by the file's bytes, one naming a folder (a data root) not at all."""
    protocol = dict(val_dataloader=cfg.get('val_dataloader'), val_evaluator=cfg.get('val_evaluator'))
    return value_digest(files_by_content(Config(copy.deepcopy(protocol)).to_dict()))


def val_samples(cfg: Config) -> Tuple[List[Any], Optional[str]]:
    """The val dataset's samples as the dataset lists them, and its data root. A val set with no samples (or missing
    folders) is refused, naming the dataset, before any scoring."""
    dataset_cfg = copy.deepcopy(cfg.val_dataloader.dataset)
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope', 'mmseg')):
        try:
            dataset = build_checked_dataset(dataset_cfg)
        except DataInputError as error:
            raise DataInputError(f'val_dataloader.dataset, the val set every arch is scored on: {error}') from None
    root = dataset_cfg.get('data_root') if isinstance(dataset_cfg, dict) else None
    infos = [dataset.get_data_info(i) for i in range(len(dataset))] if hasattr(dataset, 'get_data_info') \
        else [repr(dataset)]
    return infos, root


def val_files_fingerprint(cfg: Config) -> str:
    """The digest of the val dataset's samples, each file by its path under the data root and its size (no file is
    read): another val set differs, the same one moved does not."""
    infos, root = val_samples(cfg)
    return value_digest(dict(count=len(infos), samples=files_by_size(infos, root)))


def val_content_fingerprint(cfg: Config) -> str:
    """The digest of the val dataset's samples, each file by its bytes (every file is read once): another val set
    with the same names and sizes differs too. Paths and modification times do not count."""
    infos, _ = val_samples(cfg)
    return value_digest(dict(count=len(infos), samples=files_by_content(infos)))


# what the model config holds besides the head, and what never changes a score: the weights are the checkpoints'
_NOT_HEAD = ('backbone', 'data_preprocessor', 'test_cfg', 'train_cfg', 'init_cfg', 'pretrained')


def _without_init_cfg(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_init_cfg(v) for k, v in value.items() if k != 'init_cfg'}
    if isinstance(value, (list, tuple)):
        return [_without_init_cfg(v) for v in value]
    return value


def _config_digest(value: Any) -> str:
    return value_digest(files_by_content(_without_init_cfg(Config(dict(value=copy.deepcopy(value))).to_dict())))


def model_fingerprints(cfg: Config, metric: str) -> Dict[str, Optional[str]]:
    """Digests of what ``cfg.model`` sets that changes a score: the backbone arguments the supernet is built with,
    the head around it (every key but the backbone, the data preprocessor, ``test_cfg`` and the weights' ``init_cfg``:
    those are ``--head-checkpoint``'s), ``test_cfg`` (whole or sliding-window inference) and the data preprocessor.
    ``metric='distill_loss'`` runs no head: only the backbone and the data preprocessor count."""
    model = cfg.model
    uses_head = metric != 'distill_loss'
    head = {k: v for k, v in model.items() if k not in _NOT_HEAD}
    return dict(backbone=_config_digest(backbone_args(cfg)),
                head_config=_config_digest(head) if uses_head else None,
                test_cfg=_config_digest(model.get('test_cfg')) if uses_head else None,
                data_preprocessor=_config_digest(model.get('data_preprocessor')))


def search_identity(cfg: Config, metric: str, checkpoint: Union[str, Checkpoint],
                    head_checkpoint: Optional[Union[str, Checkpoint]]) -> Dict[str, Any]:
    """The inputs a search's scores depend on, by content (see :data:`IDENTITY_NAMES`)."""
    objective = saved_distill_objective(checkpoint) if metric == 'distill_loss' else None
    return dict(metric=metric, higher_is_better=config_metric_direction(metric, cfg),
                distill_objective=None if objective is None else value_digest(objective),
                supernet=state_fingerprint(checkpoint), head=state_fingerprint(head_checkpoint),
                **model_fingerprints(cfg, metric),
                val_protocol=val_protocol_fingerprint(cfg), val_files=val_files_fingerprint(cfg))


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + '...'


def _rank_name(key: str) -> str:
    """What a compared key is, for the message."""
    if key.startswith('option.'):
        return f'the search option {key[len("option."):]}'
    return RANK_NAMES.get(key, key)


def _differences(gathered: List[Tuple[Dict[str, Any], Optional[str]]]) -> List[str]:
    """Each rank's values that differ from rank 0's, one line each naming the rank and the field."""
    reference, order = gathered[0][0], list(RANK_NAMES)
    found = []
    for rank, (other, _) in enumerate(gathered[1:], start=1):
        keys = sorted(set(reference) | set(other), key=lambda k: (order.index(k) if k in order else len(order), k))
        found += [f'rank {rank}\'s {key} ({_rank_name(key)}) differs from rank 0\'s: rank 0 '
                  f'{_short(reference.get(key))}, rank {rank} {_short(other.get(key))}'
                  for key in keys if reference.get(key) != other.get(key)]
    return found


def agreed_identity(identity: Callable[[], Dict[str, Any]], extra: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
    """This process's ``identity()``, once every process of a distributed search is known to have the same one and
    the same ``extra()`` (values compared, not recorded: the val files' content, the search options). Every process
    gathers every other's (``all_gather_object``) and compares them with rank 0's, so that a difference is refused
    on every rank alike (no rank waits for another that stopped), naming each differing rank and field. One
    process computes ``identity()`` only."""
    if get_world_size() == 1:
        return identity()
    mine: Dict[str, Any] = {}
    raised: Optional[Exception] = None
    try:
        mine = identity()
        own = dict(mine, **extra())
    except Exception as caught:  # noqa: BLE001  (re-raised below, once the other ranks know of it)
        own, raised = {}, caught
    gathered = all_gather_object((own, None if raised is None else f'{type(raised).__name__}: {raised}'))
    if raised is not None:
        raise raised
    failed = [(rank, error) for rank, (_, error) in enumerate(gathered) if error is not None]
    if failed:
        raise RuntimeError(f'rank {failed[0][0]} of {len(gathered)} could not check its search inputs '
                           f'({failed[0][1]}); every rank stops before any scoring')
    differences = _differences(gathered)
    if differences:
        raise ValueError('the processes of this search do not have the same inputs: ' + '; '.join(differences)
                         + '. Each rank scores its share of the val set and the scores would mix: give every rank '
                         'the same data, config, checkpoints and flags')
    return mine
