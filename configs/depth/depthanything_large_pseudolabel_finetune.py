# Fine-tuning a searched JetViT-DepthAnything-L hybrid (arch fixed) with DepthAnythingV2's pseudo-label recipe: the
# frozen DepthAnythingV2-L teacher predicts disparity on each augmented batch of unlabeled images and the hybrid
# learns it with the scale-and-shift-invariant loss + gradient matching (1 : 2, as DepthAnythingV2), leaving out
# each image's 10 % of pixels with the largest loss (DepthAnythingV2's guard against noisy pseudo-labels).
#   tools/train.py configs/depth/depthanything_large_pseudolabel_finetune.py --cfg-options \
#       model.teacher.checkpoint=/path/depth_anything_v2_vitl.pth \
#       model.backbone.arch=<searched 24 letters> model.backbone.checkpoint=<search dir>/hybrid_<arch>.pth \
#       model.decode_head.checkpoint=/path/depth_anything_v2_vitl.pth
# then depthanything_large_eval.py / _search_da2k.py with tools/test.py on the result (+ model.backbone.arch=...).
#
# Teacher: docs/method.md and the paper label with "the largest DepthAnythingV2". The public release has S/B/L weights
# (Giant, 1.3B, was announced but not published), so the ViT-L teacher labels here: the largest one a user can
# download. With Giant weights of your own, the dinov2_vitg14 variant (SwiGLU) loads them as the teacher
# (model.teacher.model_name=dinov2_vitg14; its student config is depthanything_giant_distill.py).
# Structure (our decision): PseudoLabelDepthEstimator = mmseg's DepthEstimator (the student: JetViT + DPTDepthHead,
# so prediction, testing and checkpoints are the evaluation configs') + a frozen JetViTDepthAnything teacher that
# labels the batch online. Online labels see exactly the student's crops and flips and need no label files; the cost
# is one teacher forward per step. The student head starts from the teacher's. Checkpoints also hold the frozen
# teacher.* weights (skipped, with a warning, when an evaluation config loads them).
# Schedule (ours; DepthAnythingV2 trains students for 480k iterations at batch 192): 40k iterations, batch 32
# (8 GPUs x 4), AdamW, backbone lr 5e-6 and head 10x (DepthAnythingV2's encoder/decoder ratio), linear decay.
_base_ = [
    '../_base_/datasets/depth_unlabeled.py',  # training: the teacher labels them
    '../_base_/datasets/nyu_depth_518.py',  # validation
    '../_base_/default_runtime.py',
    '../_base_/models/depthanything_large.py',
]

model = dict(
    type='PseudoLabelDepthEstimator',
    data_preprocessor=dict(_base_.data_preprocessor, size=_base_.crop_size),
    teacher=dict(type='JetViTDepthAnything', model_name='dinov2_vitl14', checkpoint=None),
    # placeholder arch with F at layers 13 and 17 (0-based; the paper's DepthAnythingV2-L placement): pass yours
    backbone=dict(arch='LWLLWLWLLWLWLFLLLFLWLWLW', checkpoint=None, frozen=False),
    decode_head=dict(loss_decode=dict(type='ScaleShiftInvariantLoss', loss_weight=1.0, gradient_weight=2.0,
                                       ignore_top=0.1)))

optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=5e-6, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=dict(custom_keys={'decode_head': dict(lr_mult=10.0)}),
    clip_grad=dict(max_norm=1.0))
param_scheduler = [dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=40000)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=40000, val_interval=4000)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=4000, max_keep_ckpts=3))
log_processor = dict(by_epoch=False)
# refinenet4.resConfUnit1 exists in every DepthAnythingV2 checkpoint but is never used in forward
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=True)
