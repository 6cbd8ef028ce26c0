# DepthAnythingV2-L (or a searched JetViT-DepthAnything-L hybrid) on Cityscapes val (500 images, depth from the stereo
# disparity) under the zero-shot relative-depth protocol of depthanything_large_eval.py, at the original resolution
# as in the JetViT paper's Table 4 (1024x2048 runs at 1036x2044: the short side kept, both sides rounded to multiples
# of 14).
#   python tools/test.py configs/depth/depthanything_large_eval_cityscapes.py \
#       work_dirs/depth_anything_v2_vitl_mmseg.pth
# Data: leftImg8bit_trainvaltest.zip, disparity_trainvaltest.zip and camera_trainvaltest.zip unpacked into
# data/cityscapes (leftImg8bit/val, disparity/val, camera/val). depth = baseline * fx / ((p - 1) / 256) for a
# disparity PNG value p > 1; p = 0 (no match) and p = 1 (zero disparity) have no ground truth.
# Depth range: up to 80 m, the usual cap for driving scenes (the paper states neither its range nor a crop; no crop
# here, where some works cut the ego car's hood off the bottom of the frame).
_base_ = [
    '../_base_/datasets/zero_shot_original_res.py',
    '../_base_/default_runtime.py',
    '../_base_/models/depthanything_large.py',
]

model = dict(data_preprocessor=_base_.data_preprocessor)

data_root = 'data/cityscapes'
val_dataloader = dict(dataset=dict(
    type='CityscapesDepthDataset', data_root=data_root,
    data_prefix=dict(img_path='leftImg8bit/val', depth_map_path='disparity/val', camera_path='camera/val')))
test_dataloader = val_dataloader
val_evaluator = dict(type='AffineInvariantDepthMetric', min_depth=1e-3, max_depth=80.0)
test_evaluator = val_evaluator
