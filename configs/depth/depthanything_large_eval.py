# DepthAnythingV2-L (or a searched JetViT-DepthAnything-L hybrid) under the zero-shot relative-depth protocol:
# per image, least-squares scale and shift of the predicted disparity to the GT disparity, then AbsRel and delta1
# (AffineInvariantDepthMetric; mmseg's DepthMetric does no alignment). Data: NYU-Depth-V2 in mmseg's layout
# (data/nyu/images/test/*.jpg, annotations/test/*.png in uint16 millimetres).
#
# Weights: the model is mmseg's DepthEstimator with a JetViT backbone (the four tapped layers 4, 11, 17, 23, after
# the final norm) and DepthAnythingV2's DPT head, whose parameters keep the original names. Convert the official
# file once to this layout (backbone.* + decode_head.*), then test it:
#   python tools/convert_depth_anything.py depth_anything_v2_vitl.pth work_dirs/depth_anything_v2_vitl_mmseg.pth
#   python tools/test.py configs/depth/depthanything_large_eval.py work_dirs/depth_anything_v2_vitl_mmseg.pth \
#       --out metrics.json
# A searched hybrid (tools/search.py --export writes hybrid_<arch>_with_head.pth) or a fine-tuned one
# (depthanything_large_pseudolabel_finetune.py): the same command with --cfg-options model.backbone.arch=<24 letters>.
#
# Preprocessing as DepthAnythingV2 (short side 518, ImageNet mean/std): ../_base_/datasets/nyu_depth_518.py.
# The paper's zero-shot sets at their original resolution: depthanything_large_eval_{diode,sintel,cityscapes}.py.
_base_ = [
    '../_base_/datasets/nyu_depth_518.py',
    '../_base_/default_runtime.py',
    '../_base_/models/depthanything_large.py',
]

model = dict(data_preprocessor=_base_.data_preprocessor)
