"""Checkpoints in the pure core: :func:`read` a file once (safely, checked, any supported format), :func:`fit` its
JetViT weights into a model, :func:`save` one (atomically, with its tensors' digest)."""
from .formats import CONVERTERS, depth_head_state, detect_format, strip_prefix, strip_wrapper_prefix, to_jetvit_names
from .integrity import DamagedCheckpointError, UnsafeCheckpointError, tensor_digest
from .io import (
    RUNNER_PREFIXES,
    Checkpoint,
    check_state_keys,
    fit,
    jetvit_part,
    read,
    save,
)

__all__ = ['CONVERTERS', 'RUNNER_PREFIXES', 'Checkpoint', 'DamagedCheckpointError', 'UnsafeCheckpointError',
           'check_state_keys', 'depth_head_state', 'detect_format', 'fit', 'jetvit_part', 'read', 'save',
           'strip_prefix', 'strip_wrapper_prefix', 'tensor_digest', 'to_jetvit_names']
