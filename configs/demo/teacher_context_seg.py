# The demo's teacher: a 12-layer DINOv3-architecture JetViT (all full attention, RoPE, 4 registers) trained from
# scratch end to end with a linear probe head on the generated context task (backbone not frozen).
#
#   python tools/train.py configs/demo/teacher_context_seg.py --work-dir work_dirs/demo/teacher \
#       --cfg-options train_dataloader.dataset.data_root=D val_dataloader.dataset.data_root=D
_base_ = [
    '../_base_/datasets/context_seg.py',
    '../_base_/default_runtime.py',
    '../_base_/models/jetvit_toy_linear.py',
    '../_base_/schedules/demo_teacher.py',
]

model = dict(data_preprocessor=_base_.data_preprocessor, backbone=dict(frozen=False))
