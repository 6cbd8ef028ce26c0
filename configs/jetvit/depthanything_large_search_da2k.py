# The evaluation the depth search scores archs with: DA-2K pair accuracy (da2k_acc, percent; the paper's 97.60 for
# DepthAnythingV2-L) of the supernet path + DepthAnythingV2-L's own DPT head (the teacher's, unchanged). As in the
# paper, each image's short edge is resized to 1022 pixels, aspect ratio kept (long edge to a multiple of 14). For a
# faster, coarser search pass --cfg-options val_dataloader.dataset.pipeline.1.size=518 to tools/search.py
# (test_dataloader.dataset.pipeline.1.size=518 to tools/test.py): DepthAnythingV2's own inference size, whose scores
# are not comparable with the paper's table.
#   python tools/search.py configs/jetvit/depthanything_large_search_da2k.py work_dirs/<distill run>/iter_20000.pth \
#       --stage 1 --metric da2k_acc --head-checkpoint work_dirs/depth_anything_v2_vitl_mmseg.pth
#   (then Step 2 on a {winner, F} supernet: --stage 2 --max-full 2 --tolerance 0.5 --export)
# --head-checkpoint: the official file in mmseg layout (see depthanything_large_eval.py: export_mmseg_checkpoint).
# tools/test.py with this config reports da2k_acc for any checkpoint in that layout.
#
# Data: DA-2K in data/da2k: annotations.json ({image path relative to data_root: [{point1: [h, w], point2: [h, w],
# closer_point}]}) and the images. Every point is checked against its image when the dataset loads.
_base_ = ['./depthanything_large_eval.py']

data_root = 'data/da2k'
da2k_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='DepthAnythingResize', size=1022, multiple=14),  # short edge 1022 = 73 x 14 (the paper's)
    dict(type='PackSegInputs',
         meta_keys=('img_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor', 'da2k_pairs')),
]
val_dataloader = dict(dataset=dict(_delete_=True, type='DA2KDataset', data_root=data_root, pipeline=da2k_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(_delete_=True, type='DA2KMetric')
test_evaluator = val_evaluator
