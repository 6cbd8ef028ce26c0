# What tests/test_docs_commands.py runs in place of configs/jetvit/dinov3_base_cityscapes.py: the Step-1 {L, W}
# supernet distillation of the tiny teacher, 2 iterations.
_base_ = ['./distill_supernet_tiny_cityscapes.py']

train_cfg = dict(max_iters=2)
default_hooks = dict(checkpoint=dict(interval=2))
