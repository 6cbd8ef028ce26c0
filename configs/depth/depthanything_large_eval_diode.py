# DepthAnythingV2-L (or a searched JetViT-DepthAnything-L hybrid) on DIODE val, indoor and outdoor scenes, under the
# zero-shot relative-depth protocol of depthanything_large_eval.py, at the images' original resolution as in the
# JetViT paper's Table 4 (768x1024 runs at 770x1022: the short side kept, both sides rounded to multiples of 14).
#   python tools/test.py configs/depth/depthanything_large_eval_diode.py work_dirs/depth_anything_v2_vitl_mmseg.pth
# The search can score archs with it (or with the Sintel / Cityscapes configs) instead of DA-2K; lower is better:
#   python tools/search.py configs/depth/depthanything_large_eval_diode.py work_dirs/<distill run>/iter_20000.pth \
#       --stage 1 --metric abs_rel --head-checkpoint work_dirs/depth_anything_v2_vitl_mmseg.pth
# Data: DIODE's val.tar.gz unpacked into data/diode (data/diode/val/{indoors,outdoor}/scene_*/scan_*/*.png with
# *_depth.npy and *_depth_mask.npy). One scene type: --cfg-options test_dataloader.dataset.scene_types=indoors
# Depth range: 0.6-350 m, the laser scanner's range and Marigold's DIODE protocol (the paper does not state its
# range). Pixels outside DIODE's validity mask have no ground truth.
# Which numbers to expect: the paper's DepthAnythingV2-L row (AbsRel 0.231, delta1 0.749) is close to what public
# reproductions get on the whole val set with this protocol (AbsRel ~0.21-0.22, delta1 ~0.755; Depth-Anything-V2
# issue #280), not to DepthAnythingV2's own table (0.065), which its author says is computed in disparity space
# (--cfg-options test_evaluator.space=disparity) and which the indoor scenes alone approach (~0.07 reported).
_base_ = [
    '../_base_/datasets/zero_shot_original_res.py',
    '../_base_/default_runtime.py',
    '../_base_/models/depthanything_large.py',
]

model = dict(data_preprocessor=_base_.data_preprocessor)

data_root = 'data/diode'
val_dataloader = dict(dataset=dict(type='DIODEDepthDataset', data_root=data_root,
                                   scene_types=('indoors', 'outdoor')))
test_dataloader = val_dataloader
val_evaluator = dict(type='AffineInvariantDepthMetric', min_depth=0.6, max_depth=350.0)
test_evaluator = val_evaluator
