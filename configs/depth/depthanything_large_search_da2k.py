# The evaluation the depth search scores archs with: DA-2K pair accuracy (da2k_acc, percent; the paper's 97.60 for
# DepthAnythingV2-L) of the supernet path + DepthAnythingV2-L's own DPT head (the teacher's, unchanged). As in the
# paper, each image's short edge is resized to 1022 pixels, aspect ratio kept (long edge to a multiple of 14). For a
# faster, coarser search pass --cfg-options val_dataloader.dataset.pipeline.1.size=518 to tools/search.py
# (test_dataloader.dataset.pipeline.1.size=518 to tools/test.py): DepthAnythingV2's own inference size, whose scores
# are not comparable with the paper's table.
#   python tools/search.py configs/depth/depthanything_large_search_da2k.py work_dirs/<distill run>/iter_20000.pth \
#       --stage 1 --metric da2k_acc --head-checkpoint work_dirs/depth_anything_v2_vitl_mmseg.pth
#   (then Step 2 on a {winner, F} supernet: --stage 2 --max-full 2 --tolerance 0.5 --export)
# --head-checkpoint: the official file in mmseg layout (see depthanything_large_eval.py: export_mmseg_checkpoint).
# tools/test.py with this config reports da2k_acc for any checkpoint in that layout.
# Data: DA-2K in data/da2k (layout: ../_base_/datasets/da2k_1022.py).
_base_ = [
    '../_base_/datasets/da2k_1022.py',
    '../_base_/default_runtime.py',
    '../_base_/models/depthanything_large.py',
]

model = dict(data_preprocessor=_base_.data_preprocessor)
