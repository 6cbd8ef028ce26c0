# Mask R-CNN with a searched JetViT hybrid of DINOv3 ViT-B/16: the teacher config's ViTDet recipe (its bases), one
# attention type per layer (L linear, W 16x16 window, F full). The arch below is an example of the form only: pass
# the one tools/search.py chose and the weights tools/export_hybrid.py wrote for it, e.g.
#   tools/train.py configs/det/mask_rcnn_jetvit_dinov3_base_hybrid_coco.py \
#       --cfg-options model.backbone.arch=LLWLFWLLWLFL model.backbone.checkpoint=/path/exported_hybrid.pth
# (also pass the supernet's mixer options if it used non-default ones, one key at a time:
# model.backbone.mixers.W.window_size=8 model.backbone.mixers.L.conv=static; a dict(...) value does not parse).
# ViTDet's own window/global interleave is model.backbone.arch=WWFWWFWWFWWF.
_base_ = [
    '../_base_/models/mask_rcnn_jetvit_dinov3_base.py',
    '../_base_/datasets/coco_instance_lsj_1024.py',
    '../_base_/schedules/vitdet_100e.py',
    '../_base_/det_runtime.py',
]

model = dict(backbone=dict(arch='LLWLFWLLWLFL', checkpoint=None))
