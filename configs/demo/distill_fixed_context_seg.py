# Distillation of one fixed arch (no supernet) on the generated context task: the weight-inheritance comparison
# of docs/toy_reproduction.md (the paper's Fig. 5): all-linear with every teacher weight inherited (default)
# or with only the MLPs inherited (--cfg-options model.student.inherit=mlp).
#
#   python tools/train.py configs/demo/distill_fixed_context_seg.py --work-dir W \
#       --cfg-options model.teacher.checkpoint=TEACHER_BACKBONE.pth [model.student.inherit=mlp]
_base_ = ['./distill_supernet_context_seg.py']

model = dict(student=dict(_delete_=True, type='JetViT', arch='L' * 12, inherit='all', **_base_.backbone))
custom_hooks = []
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=False)
