# What tests/test_docs_commands.py runs in place of configs/jetvit/dinov3_base_cityscapes_step2.py: the Step-2
# {Step-1 winner, F} supernet of the tiny teacher (the arch is set on the command line, as in the docs), 2 iterations.
_base_ = ['./docs_distill_tiny_cityscapes.py']

model = dict(student=dict(search_space=None, step1_arch='LWLW'))
custom_hooks = [dict(type='SupernetSamplerHook', mode='budgeted', max_full=2)]
