"""Checkpoint conversion as pure functions: state dict in, JetViT-named state dict out."""
from .formats import CONVERTERS, depth_head_state, detect_format, to_jetvit_names
from .io import (
    check_saved_arch,
    check_saved_mixing,
    check_state_keys,
    read_checkpoint,
    read_state_dict,
    runner_backbone,
    saved_backbone_arch,
)

__all__ = ['CONVERTERS', 'check_saved_arch', 'check_saved_mixing', 'check_state_keys', 'depth_head_state',
           'detect_format', 'read_checkpoint', 'read_state_dict', 'runner_backbone', 'saved_backbone_arch',
           'to_jetvit_names']
