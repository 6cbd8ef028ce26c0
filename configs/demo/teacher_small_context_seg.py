# The demo's smaller teacher: the teacher of teacher_context_seg.py at half its width (32 wide, 2 heads of the same
# 16 channels; 12 layers, RoPE, 4 registers), trained with the same recipe and steps: what a user would pick instead
# of a searched hybrid. At DINOv3 scale half of DINOv3-B's width is DINOv3-S (384 wide, 6 heads, 12 layers): the
# demo's latency column times it with those shapes.
#
#   python tools/train.py configs/demo/teacher_small_context_seg.py --work-dir work_dirs/demo/teacher_small \
#       --cfg-options train_dataloader.dataset.data_root=D val_dataloader.dataset.data_root=D
_base_ = [
    '../_base_/datasets/context_seg.py',
    '../_base_/default_runtime.py',
    '../_base_/models/jetvit_toy_linear.py',
    '../_base_/schedules/demo_teacher.py',
]

embed_dim = 32
model = dict(data_preprocessor=_base_.data_preprocessor,
             backbone=dict(frozen=False, embed_dim=embed_dim, num_heads=2),
             decode_head=dict(in_channels=embed_dim))

