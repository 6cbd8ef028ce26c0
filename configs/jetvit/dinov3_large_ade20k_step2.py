# JetViT Step 2 of dinov3_large_ade20k.py: a supernet with {Step-1 winner, F} per layer, same teacher.
#   tools/train.py configs/jetvit/dinov3_large_ade20k_step2.py \
#       --cfg-options model.teacher.checkpoint=... model.student.step1_arch=<best arch of tools/search.py --stage 1>
# The step1_arch below is only a placeholder of the right length (24 layers); always pass the searched one.
_base_ = ['./dinov3_large_ade20k.py']

model = dict(student=dict(search_space=None, step1_arch='LWLLWWLLWLWLLWLLWWLLWLWL'))
# keep few F layers per path so the efficient candidates keep getting trained (budgeted sampling)
custom_hooks = [dict(type='SupernetSamplerHook', mode='budgeted', max_full=4)]
