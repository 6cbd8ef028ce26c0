# DepthAnythingV2-L (or a searched JetViT-DepthAnything-L hybrid) on DIODE val, indoor and outdoor scenes, under the
# zero-shot relative-depth protocol of depthanything_large_eval.py, at the images' original resolution as in the
# JetViT paper's Table 4 (768x1024 runs at 770x1022: the short side kept, both sides rounded to multiples of 14).
#   python tools/test.py configs/jetvit/depthanything_large_eval_diode.py work_dirs/depth_anything_v2_vitl_mmseg.pth
# Data: DIODE's val.tar.gz unpacked into data/diode (data/diode/val/{indoors,outdoor}/scene_*/scan_*/*.png with
# *_depth.npy and *_depth_mask.npy). One scene type: --cfg-options test_dataloader.dataset.scene_types=indoors
# Depth range: 0.6-350 m, the laser scanner's range (the paper does not state its range). Pixels outside DIODE's
# validity mask have no ground truth.
_base_ = ['./depthanything_large_eval.py']

data_root = 'data/diode'
meta_keys = ('img_path', 'depth_map_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor', 'flip',
             'flip_direction')
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadZeroShotDepth'),
    dict(type='DepthAnythingResize', size=None, multiple=14),  # None: each image's own short side
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
val_dataloader = dict(dataset=dict(_delete_=True, type='DIODEDepthDataset', data_root=data_root,
                                   scene_types=('indoors', 'outdoor'), test_mode=True, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='AffineInvariantDepthMetric', min_depth=0.6, max_depth=350.0)
test_evaluator = val_evaluator
