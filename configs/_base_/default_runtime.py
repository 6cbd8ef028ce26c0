# What every JetViT segmentation and depth config shares: mmseg's runtime, the import that registers this plugin's
# types, and the input normalisation of DINOv3 and DINOv2 / DepthAnythingV2 (ImageNet mean and std, RGB, 0-255).
# An experiment puts the normaliser into its model, with what its task adds (crop size, padding values):
#   model = dict(data_preprocessor=dict(_base_.data_preprocessor, size=crop_size))
_base_ = ['mmseg::_base_/default_runtime.py']
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)
# The runner every run of this project has, whichever tool starts it (tools/train.py, or mmseg's / mmdet's own
# tools/train.py and tools/test.py): it checks the data, trains distributed on CPUs, loads checkpoints safely, and adds
# to mmengine's default hooks the checkpoint hook (jetvit_mm/mm/engine/runner.py JETVIT_DEFAULT_HOOKS): each checkpoint
# carries the JetViTs' arch specs in its state dict, its runner state as plain data and the digest of its tensors. A
# config sets it like mmengine's own default hooks (default_hooks.checkpoint_digest=None removes it); an FSDP2 config
# sets runner_type = 'FSDP2Runner' (a JetViTRunner).
runner_type = 'JetViTRunner'

data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True)
