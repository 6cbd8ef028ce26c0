# Supernet distillation on the generated context task (images only, no labels): Step 1 ({L, W} per layer) as is;
# Step 2 with --cfg-options model.student.search_space=None model.student.step1_arch=ARCH ({winner, F} per
# layer). The student inherits every teacher weight (model.student.inherit='mlp': only the MLPs, the paper's
# comparison). The export's finetune_<ARCH>.py inherits this file (fixed arch, no path sampling).
#
#   python tools/train.py configs/demo/distill_supernet_context_seg.py --work-dir W \
#       --cfg-options model.teacher.checkpoint=TEACHER_BACKBONE.pth train_dataloader.dataset.data_root=D
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
    student=dict(type='JetViTSupernet', search_space='LW', **backbone),
    distill_indices=(-1, ),
    loss='mse')
# images only: no validation or test loop
val_dataloader = val_evaluator = val_cfg = None
test_dataloader = test_evaluator = test_cfg = None
