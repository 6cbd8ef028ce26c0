# Distillation of one fixed arch (no supernet) on the generated context task: the weight-inheritance comparison
# of docs/toy_reproduction.md (the paper's Fig. 5): all-linear with every teacher weight inherited (default)
# or with only the MLPs inherited (--cfg-options model.student.inherit=mlp).
#
#   python tools/train.py configs/demo/distill_fixed_context_seg.py --work-dir W \
#       --cfg-options model.teacher.checkpoint=TEACHER_BACKBONE.pth [model.student.inherit=mlp]
_base_ = [
    '../_base_/datasets/context_seg.py',
    '../_base_/default_runtime.py',
    '../_base_/models/jetvit_toy_linear.py',  # its backbone for teacher and student (the segmentor is replaced)
    '../_base_/schedules/demo.py',
    '../_base_/schedules/demo_distill.py',
]

backbone = _base_.backbone
model = dict(
    _delete_=True,  # not the base's segmentor
    type='FeatureDistiller',
    data_preprocessor=dict(_base_.data_preprocessor, pad_val=0, seg_pad_val=255, size=_base_.image_size,
                           test_cfg=dict(size_divisor=16)),
    teacher=dict(type='JetViT', checkpoint=None, **backbone),
    student=dict(type='JetViT', arch='L' * 12, inherit='all', **backbone),
    distill_indices=(-1, ),
    loss='mse')
val_dataloader = val_evaluator = val_cfg = None
test_dataloader = test_evaluator = test_cfg = None
custom_hooks = []  # one fixed arch: no path sampling
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=False)
