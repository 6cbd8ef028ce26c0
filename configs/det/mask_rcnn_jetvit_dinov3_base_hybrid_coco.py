# Mask R-CNN with a searched JetViT hybrid of DINOv3 ViT-B/16: the teacher config's ViTDet recipe, one attention
# type per layer (L linear, W 16x16 window, F full). The arch below is an example of the form only: pass the one
# tools/search.py chose and the weights tools/export_hybrid.py wrote for it, e.g.
#   tools/train.py configs/det/mask_rcnn_jetvit_dinov3_base_hybrid_coco.py \
#       --cfg-options model.backbone.arch=LLWLFWLLWLFL model.backbone.checkpoint=/path/exported_hybrid.pth
# (also pass model.backbone.window_size / linear_cfg if the supernet used non-default ones, one key at a time:
# model.backbone.linear_cfg.conv=static; a dict(...) value does not parse). ViTDet's own
# window/global interleave is model.backbone.arch=WWFWWFWWFWWF.
_base_ = ['./mask_rcnn_jetvit_dinov3_base_coco.py']

model = dict(backbone=dict(arch='LLWLFWLLWLFL', checkpoint=None))
