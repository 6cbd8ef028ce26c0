# Mask R-CNN on a DINOv3 ViT-B/16 JetViT backbone (the teacher: arch 'F' * 12) with ViTDet's simple feature
# pyramid, fine-tuned on COCO instance segmentation with the ViTDet recipe (Li et al., 2022): the model, the
# 1024x1024 large-scale jitter and the 100-epoch schedule of the bases below.
#
# Weights: `checkpoint=None` is a placeholder; pass the official file (timm / Hugging Face / JetViT exports load too):
#   tools/train.py configs/det/mask_rcnn_jetvit_dinov3_base_coco.py \
#       --cfg-options model.backbone.checkpoint=/path/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth
# On GPUs train in mixed precision as ViTDet: tools/train.py ... --amp.
#
# Attention per layer: the teacher uses full attention in all 12 layers. Any 12-letter L/W/F arch runs here
# (see mask_rcnn_jetvit_dinov3_base_hybrid_coco.py). ViTDet's own interleave, windows with a global layer every
# third block, is the arch 'WWFWWFWWFWWF'.
_base_ = [
    '../_base_/models/mask_rcnn_jetvit_dinov3_base.py',
    '../_base_/datasets/coco_instance_lsj_1024.py',
    '../_base_/schedules/vitdet_100e.py',
    '../_base_/det_runtime.py',
]
