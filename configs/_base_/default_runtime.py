# What every JetViT segmentation and depth config shares: mmseg's runtime, the import that registers this plugin's
# types, and the input normalisation of DINOv3 and DINOv2 / DepthAnythingV2 (ImageNet mean and std, RGB, 0-255).
# An experiment puts the normaliser into its model, with what its task adds (crop size, padding values):
#   model = dict(data_preprocessor=dict(_base_.data_preprocessor, size=crop_size))
_base_ = ['mmseg::_base_/default_runtime.py']
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)
# The runner and the checkpoint hooks every run of this project has, whichever tool starts it (tools/train.py, or
# mmseg's / mmdet's own tools/train.py and tools/test.py): the runner checks the data, trains distributed on CPUs and
# loads checkpoints safely (jetvit_mm/mm/runner.py); each checkpoint carries the JetViTs' arch specs in its meta, its
# runner state as plain data and the digest of its tensors (jetvit_mm/mm/hooks.py). In default_hooks (a dict) so that
# a config's own default_hooks or custom_hooks keep them; an FSDP2 config sets runner_type = 'FSDP2Runner'.
runner_type = 'JetViTRunner'
default_hooks = dict(
    arch_spec=dict(type='ArchSpecHook'),
    plain_checkpoint=dict(type='PlainCheckpointHook'),
    checkpoint_digest=dict(type='CheckpointDigestHook'))

data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True)
