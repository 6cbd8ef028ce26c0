"""What the search loop (:mod:`jetvit_mm.mm.search.loop`) scores with: a trained supernet and its teacher, the
downstream model around them, the metric and its direction, the arch scorer over the framework's val dataloader and
evaluator."""
import copy
import inspect
import logging
import re
from typing import Dict, Iterable, Optional, Sequence, Tuple, Union

import torch
from mmengine.config import Config
from mmengine.dist import all_reduce
from mmengine.evaluator import Evaluator
from mmengine.hooks import CheckpointHook
from mmengine.logging import MMLogger
from mmengine.registry import DefaultScope
from torch import nn

from jetvit_mm.distill.distiller import Distiller
from jetvit_mm.models.arch import mixer_table_of
from jetvit_mm.models.checkpoint import Checkpoint, apply_checkpoint, read
from jetvit_mm.models.jetvit import JetViT
from jetvit_mm.models.supernet import JetViTSupernet
from jetvit_mm.models.variants import VARIANTS

from ..checkpoint import saved_model_config
from ..registry import METRICS, MODELS

# Where a metric's direction comes from (True: higher is better), first to last: a metric class that declares a
# ``higher_is_better`` dict (this project's depth metrics); the config's ``default_hooks.checkpoint`` ``greater_keys``
# / ``less_keys``; mmengine's CheckpointHook rule (its default greater and less keys, e.g. mIoU, mAP; loss), the rule
# mmengine itself uses to keep the best checkpoint of that metric (:func:`check_metric`).

# Metrics reported in percent (mmseg's IoUMetric, DA-2K accuracy); the others (mmdet's COCO mAPs, AbsRel, delta1,
# the distillation loss) are fractions. The search's default thresholds are in percentage points, scaled by this.
PERCENT_METRICS = ('mIoU', 'aAcc', 'mAcc', 'mDice', 'mFscore', 'da2k_acc')
DEFAULT_MIN_GAIN, DEFAULT_TOLERANCE = 0.1, 0.5  # percentage points: Step-1 plateau, Step-2 gap to the teacher


def default_thresholds(metric: str) -> Tuple[float, float]:
    """``(min_gain, tolerance)`` in ``metric``'s own units: 0.1 and 0.5 points of a percent metric (mIoU), 0.001
    and 0.005 of a fraction (COCO mAP, AbsRel, distill_loss)."""
    scale = 1.0 if metric in PERCENT_METRICS else 0.01
    return DEFAULT_MIN_GAIN * scale, DEFAULT_TOLERANCE * scale


# Metric names each evaluator type reports (for the check before any scoring).
def _names(value: object) -> list:
    """A metric-kind option as a list: mmseg / mmdet accept one name as a plain string (``metric='bbox'``)."""
    return [value] if isinstance(value, str) else list(value)


EVALUATOR_METRICS = {
    'IoUMetric': lambda cfg: ['aAcc', 'mAcc', 'mPrecision', 'mRecall'] + _names(cfg.get('iou_metrics', ['mIoU'])),
    'CocoMetric': lambda cfg: [f'coco/{kind}_{name}' for kind in _names(cfg.get('metric', ['bbox']))
                               for name in ('mAP', 'mAP_50', 'mAP_75', 'mAP_s', 'mAP_m', 'mAP_l')],
}
BACKBONE_KEYS = ('model_name', 'embed_dim', 'depth', 'num_heads', 'qkv_bias', 'pos_embed_interp', 'out_indices',
                 'mixers')


def metric_direction(metric: str, greater_keys: Optional[Sequence[str]] = None,
                     less_keys: Optional[Sequence[str]] = None) -> Optional[bool]:
    """Whether higher is better for ``metric`` by mmengine's CheckpointHook rule (its ``save_best`` rule): an exact
    greater / less key first, then a key contained in the name; None when neither rule names it."""
    greater = list(CheckpointHook._default_greater_keys if greater_keys is None else greater_keys)
    less = list(CheckpointHook._default_less_keys if less_keys is None else less_keys)
    if metric in greater or metric in less:
        return metric in greater
    if any(key in metric for key in greater):
        return True
    if any(key in metric for key in less):
        return False
    return None


def check_metric(metric: str, evaluator_cfg: Optional[dict], checkpoint_cfg: Optional[dict] = None) -> bool:
    """Validate ``metric`` before any scoring; returns whether higher is better (see :func:`metric_direction`;
    ``checkpoint_cfg``: the config's ``default_hooks.checkpoint``, whose ``greater_keys`` / ``less_keys`` count)."""
    declared: Dict[str, bool] = {}
    if metric != 'distill_loss' and evaluator_cfg is not None:
        kind = evaluator_cfg.get('type', '').split('.')[-1]
        own = getattr(METRICS.get(kind), 'higher_is_better', None) if kind else None
        if isinstance(own, dict):  # a metric class that declares its names and directions
            names = list(own)
            declared = dict(own)
        else:
            names = EVALUATOR_METRICS[kind](evaluator_cfg) if kind in EVALUATOR_METRICS else None
        if names is not None and metric not in names:
            raise ValueError(f'unknown metric {metric!r}: the config\'s {kind} reports {names}; '
                             f'or use distill_loss (no labels)')
    if metric in declared:
        return declared[metric]
    checkpoint_cfg = checkpoint_cfg or {}
    higher = metric_direction(metric, checkpoint_cfg.get('greater_keys'), checkpoint_cfg.get('less_keys'))
    if higher is None:
        raise ValueError(f'metric {metric!r} has no declared direction (higher or lower is better): neither its '
                         f'metric class (a higher_is_better dict) nor mmengine\'s CheckpointHook rule names it '
                         f'(greater keys {list(CheckpointHook._default_greater_keys)}, less keys '
                         f'{list(CheckpointHook._default_less_keys)}): declare it in the config, e.g. '
                         f'default_hooks.checkpoint.greater_keys=[{metric!r}]')
    return higher


def config_metric_direction(metric: str, cfg: Config) -> bool:
    """:func:`check_metric` for the metric of ``cfg``'s ``val_evaluator`` and checkpoint hook."""
    return check_metric(metric, cfg.get('val_evaluator'), (cfg.get('default_hooks') or {}).get('checkpoint'))


def backbone_args(cfg: Config) -> dict:
    backbone = cfg.model.backbone
    return {k: copy.deepcopy(backbone[k]) for k in BACKBONE_KEYS if backbone.get(k) is not None}


def declared_letters(cfg: Config) -> str:
    """The mixer letters the config's backbone declares (its ``mixers``, default F, L, W), read without building it."""
    return mixer_table_of(cfg.model.backbone).letters


def declared_depth(cfg: Config) -> Optional[int]:
    """The number of layers of the config's backbone, read without building it (None for a timm model name)."""
    backbone = cfg.model.backbone
    variant = VARIANTS.get(backbone.get('model_name', inspect.signature(JetViT).parameters['model_name'].default))
    return backbone.get('depth') or (variant.depth if variant is not None else None)


def load_supernet(checkpoint: Union[str, Checkpoint], cfg: Config) -> Tuple[JetViTSupernet, JetViT]:
    """The trained supernet (``student.*``) and its teacher (``teacher.*``) from a distillation checkpoint (a path, or
    read already), each checked against the spec it was saved with."""
    checkpoint = read(checkpoint)
    space: Dict[int, str] = {}
    for key in checkpoint.state:  # any weight of a candidate (one that inherits nothing has no qkv)
        m = re.match(r'student\.blocks\.(\d+)\.attn\.candidates\.([A-Z])\.', key)
        if m and m.group(2) not in space.get(int(m.group(1)), ''):
            space[int(m.group(1))] = space.get(int(m.group(1)), '') + m.group(2)
    if not space or not any(k.startswith('teacher.') for k in checkpoint.state):
        raise ValueError(f'{checkpoint.path} is not a supernet distillation checkpoint: it needs '
                         f'student.*.attn.candidates.* and teacher.* weights (a tools/train.py checkpoint of a '
                         f'FeatureDistiller with a JetViTSupernet student)')
    args = backbone_args(cfg)
    declared = mixer_table_of(args).letters  # the candidates in the order the config declares its letters

    def rank(letter: str) -> int:
        return declared.index(letter) if letter in declared else len(declared)  # undeclared: refused below

    supernet = JetViTSupernet(search_space=[''.join(sorted(space[i], key=rank)) for i in range(len(space))], **args)
    student = read(checkpoint, 'student.')
    try:
        apply_checkpoint(supernet, student)
    except ValueError:  # a window or L option of the config's backbone differs from the distillation's: name it
        differ = {} if student.spec is None else student.spec.option_differences(supernet.spec)
        if not differ:
            raise
        saved, built = (', '.join(f'{k}={values[i]!r}' for k, values in differ.items()) for i in (0, 1))
        fix = ' '.join(f'model.backbone.{k}={a!r}' for k, (a, _) in differ.items())
        raise ValueError(f'{checkpoint.path} was distilled with {saved}, but the config\'s backbone has {built}: '
                         f'pass --cfg-options {fix}') from None
    teacher = JetViT(**args)
    apply_checkpoint(teacher, read(checkpoint, 'teacher.'))
    return supernet.eval().requires_grad_(False), teacher.eval().requires_grad_(False)


DEFAULT_DISTILL_OBJECTIVE = dict(loss='mse', loss_cfg={}, distill_indices=(-1, ))  # FeatureDistiller's defaults


def saved_distill_objective(checkpoint: Union[str, Checkpoint]) -> dict:
    """``loss``, ``loss_cfg`` and ``distill_indices`` of the FeatureDistiller that wrote ``checkpoint`` (a path, or
    read already; from its saved config, FeatureDistiller's defaults for what it does not set), for ``--metric
    distill_loss``."""
    meta = read(checkpoint, mmap=True).meta
    model = saved_model_config(meta) or {}
    return {k: model.get(k) if model.get(k) is not None else v for k, v in DEFAULT_DISTILL_OBJECTIVE.items()}


def build_downstream_model(cfg: Config) -> nn.Module:
    """``cfg.model`` (in ``cfg``'s scope) with a JetViT of ``backbone_args(cfg)`` as a placeholder backbone."""
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope', 'mmseg')):
        model_cfg = copy.deepcopy(cfg.model)
        model_cfg.backbone = dict(type='JetViT', **backbone_args(cfg))  # replaced by the caller; cheap to build
        return MODELS.build(model_cfg)


def load_downstream_heads(model: nn.Module, checkpoint: Union[str, Checkpoint], config_name: str) -> None:
    """Everything but the backbone from a trained downstream checkpoint (a path, or read already), strictly: a
    segmentor's ``decode_head`` (and ``auxiliary_head``), a detector's ``neck``, ``rpn_head`` and ``roi_head``."""
    checkpoint = read(checkpoint)
    if all(k.startswith('backbone.') for k in checkpoint.state):
        raise ValueError(f'{checkpoint.path} has no weights besides backbone.*: give the checkpoint of the teacher\'s '
                         f'trained downstream model (head, neck, ...)')
    apply_checkpoint(model, checkpoint, skip=('backbone.', 'data_preprocessor.'),
                     target=f'the downstream model of {config_name}')


def prepare_downstream_model(model: nn.Module, teacher: JetViT, metric: str,
                             head_checkpoint: Optional[Union[str, Checkpoint]], config_name: str) -> nn.Module:
    """The downstream model (the runner's, built from the config with a placeholder backbone) ready to score archs:
    its heads loaded strictly from ``head_checkpoint`` (not for ``distill_loss``: no head runs), the teacher as its
    backbone until :meth:`DownstreamScorer.evaluate` swaps in the model it scores, in eval mode."""
    if metric != 'distill_loss':
        if head_checkpoint is None:
            raise ValueError(f'metric {metric!r} needs --head-checkpoint: the teacher\'s trained head '
                             f'(a tools/train.py checkpoint of {config_name} with the teacher)')
        load_downstream_heads(model, head_checkpoint, config_name)
    model.backbone = teacher  # drop the placeholder
    return model.eval()


class DownstreamScorer:
    """Scores archs of ``supernet`` with a downstream model and the framework's val dataloader and evaluator (built
    by mmengine's runner from the config: under a distributed launcher each process sees its split of the val set
    and the evaluator collects the results, so every process gets the score of the whole set).

    ``model``: the config's downstream model from :func:`prepare_downstream_model`. ``metric='distill_loss'`` needs
    no labels, no head and no evaluator: the distillation objective (:class:`~jetvit_mm.distill.distiller.Distiller`)
    of the path's features against the teacher's on the val images.
    """

    def __init__(self, model: nn.Module, loader: Iterable, evaluator: Optional[Evaluator], supernet: JetViTSupernet,
                 teacher: JetViT, metric: str, device: Union[str, torch.device] = 'cpu',
                 distill_objective: Optional[dict] = None, scope: str = 'mmseg') -> None:
        if metric != 'distill_loss' and evaluator is None:
            raise ValueError(f'metric {metric!r} needs the config\'s val_evaluator')
        self.model, self.loader, self.evaluator = model, loader, evaluator
        self.supernet, self.teacher, self.metric, self.scope = supernet, teacher, metric, scope
        self.distill_objective = dict(DEFAULT_DISTILL_OBJECTIVE, **(distill_objective or {}))
        if evaluator is not None:
            evaluator.dataset_meta = loader.dataset.metainfo
        self.scored = 0  # how many evaluations this scorer ran (the teacher's too)
        self.to(device)

    def to(self, device: Union[str, torch.device]) -> 'DownstreamScorer':
        """Score on ``device``: the downstream model (its data preprocessor too), the supernet and the teacher."""
        self.device = torch.device(device)
        for module in (self.model, self.supernet, self.teacher):
            module.to(self.device)
        return self

    @torch.no_grad()
    def evaluate(self, backbone: JetViT) -> float:
        """The metric of the downstream model with ``backbone``, over the whole val set (every process's split)."""
        self.model.backbone = backbone
        self.scored += 1
        if self.metric == 'distill_loss':
            return self._distill_loss(backbone)
        logger = MMLogger.get_current_instance()
        level = logger.level
        logger.setLevel(logging.WARNING)  # the evaluator's per-class table, once per arch, would drown the progress
        try:
            with DefaultScope.overwrite_default_scope(self.scope):
                for batch in self.loader:
                    self.evaluator.process(data_samples=self.model.val_step(batch), data_batch=batch)
                metrics = self.evaluator.evaluate(len(self.loader.dataset))  # collected from every process
        finally:
            logger.setLevel(level)
        if self.metric not in metrics:
            raise KeyError(f'the evaluator reported {sorted(metrics)}, not {self.metric!r}')
        return float(metrics[self.metric])

    def input_size(self) -> Tuple[int, int]:
        """The size the backbone sees for the first val batch: after the data preprocessor (its padding), rounded
        up to whole patches (e.g. ADE20K's 512x683 images); with mmseg's sliding-window inference, one window."""
        batch = next(iter(self.loader))
        with torch.no_grad():
            inputs = self.model.data_preprocessor(batch, training=False)['inputs']
        size = [int(s) for s in inputs.shape[-2:]]
        test_cfg = getattr(self.model, 'test_cfg', None) or {}
        if test_cfg.get('mode') == 'slide':  # each window is cut from the image and fed as it is
            size = [min(crop, s) for crop, s in zip(test_cfg['crop_size'], size)]
        patch = self.teacher.patch_size
        return tuple(-(-s // patch) * patch for s in size)

    def _distill_loss(self, backbone: JetViT) -> float:
        """The distillation run's own objective (its loss, options and layers: the one
        :class:`~jetvit_mm.distill.distiller.Distiller`) on the val images, weighted by batch size and summed over
        every process; every arch sees the same random draws (the activation loss's token subsets)."""
        objective = self.distill_objective
        distiller = Distiller(self.teacher, backbone, objective['distill_indices'], objective['loss'],
                              objective['loss_cfg'])
        total = torch.zeros(2, dtype=torch.float64)  # loss x images, images
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            for batch in self.loader:
                inputs = self.model.data_preprocessor(batch, training=False)['inputs']
                total += torch.tensor([float(distiller(inputs)) * inputs.shape[0], inputs.shape[0]],
                                      dtype=torch.float64)
        all_reduce(total, op='sum')  # no-op in one process
        return float(total[0] / total[1])

    def score_arch(self, arch: str) -> float:
        self.supernet.set_arch(arch)
        return self.evaluate(self.supernet)

    def teacher_score(self) -> float:
        return self.evaluate(self.teacher)

