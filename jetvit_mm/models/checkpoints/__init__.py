"""Checkpoint conversion as pure functions: state dict in, JetViT-named state dict out."""
from .extensions import RUNNER_PREFIXES, jetvit_part, register_fallback_loader
from .formats import CONVERTERS, depth_head_state, detect_format, strip_prefix, strip_wrapper_prefix, to_jetvit_names
from .integrity import DamagedCheckpointError, save_checkpoint, tensor_digest
from .io import UnsafeCheckpointError, check_state_keys, read_checkpoint

__all__ = ['CONVERTERS', 'RUNNER_PREFIXES', 'DamagedCheckpointError', 'UnsafeCheckpointError', 'check_state_keys',
           'depth_head_state', 'detect_format', 'jetvit_part', 'read_checkpoint', 'register_fallback_loader',
           'save_checkpoint', 'strip_prefix', 'strip_wrapper_prefix', 'tensor_digest', 'to_jetvit_names']
