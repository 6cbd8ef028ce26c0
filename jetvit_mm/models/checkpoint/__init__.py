"""Checkpoints in the pure core: :func:`read` a file once (safely, checked, any supported format),
:func:`apply_checkpoint` it to a model (the one way weights are applied), :func:`save` one (atomically, with its
tensors' digest)."""
from .formats import CONVERTERS, depth_head_state, detect_format, strip_prefix, strip_wrapper_prefix, to_jetvit_names
from .integrity import DamagedCheckpointError, UnsafeCheckpointError, tensor_digest
from .io import RUNNER_PREFIXES, Checkpoint, CheckpointMismatch, LoadReport, apply_checkpoint, read, save

__all__ = ['CONVERTERS', 'RUNNER_PREFIXES', 'Checkpoint', 'CheckpointMismatch', 'DamagedCheckpointError', 'LoadReport',
           'UnsafeCheckpointError', 'apply_checkpoint', 'depth_head_state', 'detect_format', 'read', 'save',
           'strip_prefix', 'strip_wrapper_prefix', 'tensor_digest', 'to_jetvit_names']
