"""Task heads in pure torch."""
from .dpt import DPT_PRESETS, DPTHead, DPTPreset, dpt_preset, head_state_from_checkpoint

__all__ = ['DPT_PRESETS', 'DPTHead', 'DPTPreset', 'dpt_preset', 'head_state_from_checkpoint']
