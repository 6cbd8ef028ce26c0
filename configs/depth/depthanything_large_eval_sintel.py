# DepthAnythingV2-L (or a searched JetViT-DepthAnything-L hybrid) on MPI Sintel (the training set, the only one with
# depth; final pass) under the zero-shot relative-depth protocol of depthanything_large_eval.py, at the frames'
# original resolution as in the JetViT paper's Table 4 (436x1024 runs at 448x1022: the short side kept, both sides
# rounded to multiples of 14).
#   python tools/test.py configs/depth/depthanything_large_eval_sintel.py work_dirs/depth_anything_v2_vitl_mmseg.pth
# Data: MPI-Sintel-complete (training/final/<scene>/frame_XXXX.png) and MPI-Sintel-depth-training
# (training/depth/<scene>/frame_XXXX.dpt) unpacked into data/sintel.
# Depth range: up to 72 units, the cap MiDaS used on Sintel as we recall it (not verified here; the paper states
# neither range nor pass). Video Depth Anything's Sintel benchmark uses 0.1-70 on the clean pass instead:
#   --cfg-options test_evaluator.min_depth=0.1 test_evaluator.max_depth=70 \
#       test_dataloader.dataset.data_prefix.img_path=training/clean
_base_ = [
    '../_base_/datasets/zero_shot_original_res.py',
    '../_base_/default_runtime.py',
    '../_base_/models/depthanything_large.py',
]

model = dict(data_preprocessor=_base_.data_preprocessor)

data_root = 'data/sintel'
val_dataloader = dict(dataset=dict(
    type='SintelDepthDataset', data_root=data_root,
    data_prefix=dict(img_path='training/final', depth_map_path='training/depth')))
test_dataloader = val_dataloader
val_evaluator = dict(type='AffineInvariantDepthMetric', min_depth=1e-3, max_depth=72.0)
test_evaluator = val_evaluator
