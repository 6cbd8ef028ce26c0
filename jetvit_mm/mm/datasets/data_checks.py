"""Datasets, dataloaders and evaluators built as mmengine builds them, with bad input named: an empty dataset, or an
annotation file that is not valid JSON or lacks a section, is refused naming the dataset, its files and what it
needs, when it is built: before the first iteration or evaluation (mmengine would say "need at least one array to
concatenate", or a bare JSON or key error)."""
import copy
import json
from typing import Any, Optional, Tuple

from mmengine.dataset import BaseDataset
from mmengine.evaluator import Evaluator
from mmengine.registry import DATASETS
from mmengine.runner import Runner
from torch.utils.data import DataLoader

from .image_pipeline import CheckedPipeline

__all__ = ['CheckedDataMixin', 'DataInputError', 'build_checked_dataloader', 'build_checked_dataset',
           'build_checked_evaluator', 'describe_dataset']

COCO_SECTIONS = 'images, annotations and categories'


class DataInputError(ValueError):
    """A dataset or evaluator input that cannot be used: no samples, or an unreadable annotation file."""


def describe_dataset(cfg: Any) -> str:
    """``Type(data_root=..., data_prefix=..., ann_file=...)``: what names a dataset's files."""
    if not isinstance(cfg, dict):
        return type(cfg).__name__
    keys = ('data_root', 'data_prefix', 'ann_file')
    shown = ', '.join(f'{k}={cfg[k]!r}' for k in keys if cfg.get(k) not in (None, '', {}))
    return f'{cfg.get("type")}({shown})'


def _reading_error(error: Exception, what: str, files: Optional[str]) -> DataInputError:
    source = files or 'its annotation file'
    if isinstance(error, json.JSONDecodeError):
        return DataInputError(f'{what}: {source} is not valid JSON (truncated, or not a JSON file): {error}')
    return DataInputError(f'{what}: {source} lacks the key {error}; a COCO-style annotation file needs '
                          f'{COCO_SECTIONS} (see the dataset\'s documentation for other formats)')


def _dataset_class(cfg: dict) -> Any:
    kind = cfg.get('type')
    if not isinstance(kind, str):
        return kind
    with DATASETS.switch_scope_and_registry(None) as registry:  # the default scope's registry, as build() uses
        return registry.get(kind)


def build_checked_dataset(cfg: dict) -> Any:
    """The dataset of ``cfg`` (a dataloader's ``dataset``), fully initialised as mmengine's runner initialises it;
    refused with :class:`DataInputError` when it has no samples or its annotation file cannot be read; its pipeline
    a :class:`~jetvit_mm.mm.datasets.image_pipeline.CheckedPipeline` (an image it cannot take is named). Dataset
    wrappers (not a :class:`~mmengine.dataset.BaseDataset`) are built as mmengine builds them."""
    cls = _dataset_class(cfg)
    if not (isinstance(cls, type) and issubclass(cls, BaseDataset)):
        dataset = DATASETS.build(cfg)
        if hasattr(dataset, 'full_init'):
            dataset.full_init()
        return dataset
    what = f'the dataset {describe_dataset(cfg)}'
    serialize = cfg.get('serialize_data', True)
    # the data list unserialised first, so that an empty one is seen before mmengine's np.concatenate
    dataset = DATASETS.build(dict(cfg, serialize_data=False, lazy_init=True))
    try:
        dataset.full_init()
    except (json.JSONDecodeError, KeyError) as error:
        raise _reading_error(error, what, cfg.get('ann_file')) from error
    except FileNotFoundError as error:  # a data folder or annotation file that is not there
        raise DataInputError(f'{what}: {error.filename or error} does not exist; check data_root, data_prefix and '
                             f'ann_file (the layout the dataset type expects)') from error
    if len(dataset) == 0:
        suffixes = ', '.join(f'{k}={getattr(dataset, k)!r}' for k in ('img_suffix', 'seg_map_suffix')
                             if hasattr(dataset, k))
        raise DataInputError(f'{what} has no samples: it looked in {dataset.data_prefix}'
                             + (f' with {suffixes}' if suffixes else '')
                             + (f' and read {dataset.ann_file}' if dataset.ann_file else '')
                             + '; check data_root, data_prefix and ann_file (the layout the dataset type expects)')
    if getattr(dataset, 'pipeline', None) is not None and hasattr(dataset.pipeline, 'transforms'):
        dataset.pipeline = CheckedPipeline(dataset.pipeline.transforms)  # an image it fails on is named
    if serialize:  # as BaseDataset.full_init would have done
        dataset.data_bytes, dataset.data_address = dataset._serialize_data()
        dataset.serialize_data = True
    return dataset


def build_checked_dataloader(dataloader: Any, seed: Optional[int] = None, diff_rank_seed: bool = False) -> Any:
    """:meth:`mmengine.runner.Runner.build_dataloader` with the dataset from :func:`build_checked_dataset`."""
    if isinstance(dataloader, DataLoader) or not isinstance(dataloader, dict):
        return Runner.build_dataloader(dataloader, seed=seed, diff_rank_seed=diff_rank_seed)
    dataloader = copy.deepcopy(dataloader)
    if isinstance(dataloader.get('dataset'), dict):
        dataloader['dataset'] = build_checked_dataset(dataloader['dataset'])
    return Runner.build_dataloader(dataloader, seed=seed, diff_rank_seed=diff_rank_seed)


def _ann_files(evaluator: Any) -> Optional[str]:
    cfgs = evaluator if isinstance(evaluator, list) else evaluator.get('metrics', evaluator) \
        if isinstance(evaluator, dict) else []
    cfgs = cfgs if isinstance(cfgs, list) else [cfgs]
    files = [str(c['ann_file']) for c in cfgs if isinstance(c, dict) and c.get('ann_file')]
    return ', '.join(files) or None


def build_checked_evaluator(evaluator: Any, build: Any = Evaluator) -> Evaluator:
    """``build(evaluator)`` (default: :class:`~mmengine.evaluator.Evaluator`), with an annotation file a metric reads
    (mmdet's ``CocoMetric(ann_file=...)``) that is not valid JSON or lacks a section named in the error."""
    try:
        built = build(evaluator)
    except (json.JSONDecodeError, KeyError) as error:
        if isinstance(error, KeyError) and 'registry' in str(error):  # an unknown metric type: mmengine's message
            raise
        raise _reading_error(error, 'the evaluator', _ann_files(evaluator)) from error
    for metric in getattr(built, 'metrics', []):
        check_coco_sections(getattr(metric, '_coco_api', None), f'the evaluator {type(metric).__name__}',
                            getattr(metric, 'ann_file', None) or _ann_files(evaluator), ('annotations', ))
    return built


def check_coco_sections(api: Any, what: str, ann_file: Any, needed: Tuple[str, ...] = ()) -> None:
    """A COCO annotation file read by pycocotools (``api``: its ``COCO`` object, None: nothing to check) must hold
    ``images`` and ``categories`` (and the ``needed`` sections: ``annotations`` to evaluate or train); pycocotools
    accepts a file without them and the run fails or scores nothing much later."""
    sections = getattr(api, 'dataset', None)
    if not isinstance(sections, dict):
        return
    missing = [k for k in ('images', 'categories', *needed) if k not in sections]
    if missing:
        raise DataInputError(f'{what}: {ann_file} lacks the key(s) {missing}; a COCO-style annotation file needs '
                             f'{COCO_SECTIONS} (a test split without labels: images and categories)')


class CheckedDataMixin:
    """Builds a runner's dataloaders and evaluators through the checked builders above; mixed into
    :class:`~jetvit_mm.mm.engine.runner.JetViTRunner` (and so :class:`~jetvit_mm.mm.engine.fsdp.FSDP2Runner`) before
    mmengine's :class:`~mmengine.runner.Runner`."""

    @staticmethod
    def build_dataloader(dataloader: Any, seed: Optional[int] = None, diff_rank_seed: bool = False) -> Any:
        return build_checked_dataloader(dataloader, seed=seed, diff_rank_seed=diff_rank_seed)

    def build_evaluator(self, evaluator: Any) -> Evaluator:
        return build_checked_evaluator(evaluator, super().build_evaluator)
