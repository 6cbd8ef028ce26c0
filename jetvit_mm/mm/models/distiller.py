"""Feature distillation of a JetViT (supernet or fixed arch) from its frozen full-attention teacher."""
import copy
import warnings
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from mmengine.model import BaseModel

from jetvit_mm.distill import get_loss
from jetvit_mm.distill.distiller import Distiller
from jetvit_mm.distill.fsdp2 import meta_parameters, own_init_modules
from jetvit_mm.models.checkpoint import apply_checkpoint, read
from jetvit_mm.models.jetvit import JetViT

from ..registry import MODELS


@MODELS.register_module()
class FeatureDistiller(BaseModel):
    """Train ``student`` to reproduce ``teacher``'s features at ``distill_indices`` (after the final norm).

    Works on images alone: the batch's labels, if any, are ignored. The teacher runs frozen in eval mode.
    If the student config has no ``checkpoint``, the student starts from the teacher's weights (every
    teacher weight, so ``--cfg-options model.teacher.checkpoint=...`` is all a user sets).

    Args:
        teacher: JetViT config of the teacher (its arch must be all F).
        student: JetViT or JetViTSupernet config with the teacher's shapes.
        distill_indices: layers to match (negative counts from the end): the last layer for a linear probe,
            the four tapped layers for a DPT head.
        loss: ``'mse'`` (default), ``'cosine'``, ``'smooth_l1'`` or ``'activation'`` (ViT-Linearizer: one
            token-similarity map per distilled layer, so ``distill_indices`` are its stages).
        loss_cfg: the loss's options, e.g. ``dict(max_tokens=2048)`` for ``'activation'`` (its maps are N x N, so
            a random subset of at most ``max_tokens`` tokens, 1024 by default, takes part at each step).
        loss_weight: multiplies the loss.
        data_preprocessor: normalisation/padding (e.g. mmseg's ``SegDataPreProcessor``).
    """

    def __init__(self, teacher: dict, student: dict, distill_indices: Sequence[int] = (-1, ), loss: str = 'mse',
                 loss_weight: float = 1.0, data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None, loss_cfg: Optional[dict] = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        get_loss(loss, loss_cfg)  # fail at build time on a bad name or option
        self.loss_name = loss
        self.loss_cfg = dict(loss_cfg or {})
        self.loss_weight = loss_weight
        self.teacher: JetViT = MODELS.build(dict(teacher, frozen=True))
        if teacher.get('checkpoint') is None:
            warnings.warn('FeatureDistiller: the teacher has no checkpoint, so the student learns a randomly '
                          'initialised ViT; pass model.teacher.checkpoint=/path/to/teacher.pth', stacklevel=2)
        if set(self.teacher.arch) != {'F'}:
            raise ValueError(f'the teacher must be all full attention, got arch {self.teacher.arch!r}')
        inherit_from_teacher = student.get('checkpoint') is None
        self.student: JetViT = MODELS.build(student)
        for attr in ('embed_dim', 'depth', 'num_heads', 'patch_size', 'num_prefix_tokens'):
            if getattr(self.teacher, attr) != getattr(self.student, attr):
                raise ValueError(f'teacher and student differ in {attr}: {getattr(self.teacher, attr)} vs '
                                 f'{getattr(self.student, attr)}')
        self.distill_indices = self.student._normalise_indices(distill_indices)
        if inherit_from_teacher:
            apply_checkpoint(self.student, self.teacher.state_dict(), source='teacher weights')
            if getattr(self.student, 'inherit', 'all') == 'mlp':
                self.student.reset_efficient_mixers()

    def init_weights(self) -> None:
        """Weights come from checkpoints and the teacher, not from init configs."""

    def meta_state(self) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.nn.Module]]:
        """For a distiller built by :func:`build_on_meta`: every parameter's full weights by name, memory-mapped from
        the checkpoints (the student's from its own checkpoint, else the teacher's, as this class loads them), and
        the modules whose parameters no checkpoint holds (:func:`~jetvit_mm.distill.fsdp2.own_init_modules`), for
        :func:`~jetvit_mm.distill.fsdp2.materialize_shards`."""
        teacher_ckpt, student_ckpt = getattr(self, 'meta_checkpoints', (None, None))
        if teacher_ckpt is None:
            raise ValueError('meta-device construction loads the weights from checkpoints: set '
                             'model.teacher.checkpoint')
        teacher = apply_checkpoint(self.teacher, read(teacher_ckpt, mmap=True), load=False).state
        teacher = {**{k: v for k, v in self.teacher.state_dict().items() if not v.is_meta}, **teacher}
        if student_ckpt is not None:
            student = apply_checkpoint(self.student, read(student_ckpt, mmap=True), load=False).state
        elif getattr(self.student, 'inherit', 'all') == 'mlp':
            raise ValueError('meta-device construction: the student\'s inherit=\'mlp\' re-initialises q/k/v/o at '
                             'random; use inherit=\'all\' or the non-meta path (model_wrapper_cfg.meta_init=False)')
        else:
            student = apply_checkpoint(self.student, teacher, load=False, source='teacher weights').state
        params = dict(self.named_parameters())
        state = {f'{part}.{k}': v for part, weights in (('teacher', teacher), ('student', student))
                 for k, v in weights.items() if f'{part}.{k}' in params}
        return state, own_init_modules(self, [name for name in params if name not in state])

    def extract_feat(self, model: JetViT, inputs: torch.Tensor) -> List[torch.Tensor]:
        return self.objective.features(model, inputs)

    @property
    def objective(self) -> Distiller:
        """The pure :class:`~jetvit_mm.distill.distiller.Distiller` on this model's teacher and student with its loss
        settings: the one distillation objective (a view made on each call, so it always holds the current modules
        and settings, and stays out of this model's state dict)."""
        return Distiller(self.teacher, self.student, self.distill_indices, self.loss_name, self.loss_cfg,
                         self.loss_weight)

    def loss(self, inputs: torch.Tensor) -> Dict[str, torch.Tensor]:
        return dict(loss_distill=self.objective(inputs))

    def forward(self, inputs: torch.Tensor, data_samples: Optional[list] = None,
                mode: str = 'tensor') -> Union[Dict[str, torch.Tensor], List[torch.Tensor]]:
        if mode == 'loss':
            return self.loss(inputs)
        if mode == 'tensor':
            return self.extract_feat(self.student, inputs)
        raise ValueError(f'FeatureDistiller supports mode "loss" and "tensor", not {mode!r}: it makes no task '
                         'predictions; evaluate the student with a task head (tools/search.py, tools/test.py)')


def build_on_meta(cfg: dict) -> FeatureDistiller:
    """Build a :class:`FeatureDistiller` config with every parameter on the meta device (no storage) and no
    checkpoint read; the checkpoints are kept for :meth:`FeatureDistiller.meta_state`, which
    :class:`~jetvit_mm.mm.engine.fsdp.FSDP2Wrapper` loads shard by shard."""
    cfg = copy.deepcopy(dict(cfg))
    teacher, student = dict(cfg['teacher']), dict(cfg['student'])
    checkpoints = (teacher.pop('checkpoint', None), student.pop('checkpoint', None))
    if checkpoints[0] is None:
        raise ValueError('meta-device construction loads the weights from checkpoints: set model.teacher.checkpoint')
    with meta_parameters(), warnings.catch_warnings():
        warnings.filterwarnings('ignore', message='FeatureDistiller: the teacher has no checkpoint')
        model = MODELS.build(dict(cfg, teacher=teacher, student=student))
    if not isinstance(model, FeatureDistiller):
        raise ValueError(f'meta-device construction builds a FeatureDistiller, got {type(model).__name__}')
    model.meta_checkpoints = checkpoints
    return model
