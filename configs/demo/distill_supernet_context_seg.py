# Supernet distillation on the generated context task (images only, no labels): Step 1 ({L, W} per layer) as is;
# Step 2 with --cfg-options model.student.search_space=None model.student.step1_arch=ARCH ({winner, F} per
# layer). The student inherits every teacher weight (model.student.inherit='mlp': only the MLPs, the paper's
# comparison). The export's finetune_<ARCH>.py inherits this file (fixed arch, no path sampling).
#
#   python tools/train.py configs/demo/distill_supernet_context_seg.py --work-dir W \
#       --cfg-options model.teacher.checkpoint=TEACHER_BACKBONE.pth train_dataloader.dataset.data_root=D
_base_ = ['./_base_/context_seg.py']

backbone = _base_.backbone
model = dict(
    _delete_=True,  # not the base's segmentor
    type='FeatureDistiller',
    data_preprocessor=_base_.data_preprocessor,
    teacher=dict(type='JetViT', checkpoint=None, **backbone),
    student=dict(type='JetViTSupernet', search_space='LW', **backbone),
    distill_indices=(-1, ),
    loss='mse')

val_dataloader = None
val_evaluator = None
val_cfg = None
test_dataloader = None
test_evaluator = None
test_cfg = None

# constant lr after a short warm-up, so that a fine-tune of any length (train_cfg.max_iters=N) keeps the schedule
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3, weight_decay=1e-4),
                     clip_grad=dict(max_norm=1.0))
param_scheduler = [dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=20)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=600)
custom_hooks = [dict(type='SupernetSamplerHook', mode='uniform')]
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=True)
