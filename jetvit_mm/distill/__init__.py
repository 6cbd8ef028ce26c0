"""Distillation losses (pure torch)."""
from .losses import LOSSES, activation_matching_loss, distill_loss, get_loss

__all__ = ['LOSSES', 'activation_matching_loss', 'distill_loss', 'get_loss']
