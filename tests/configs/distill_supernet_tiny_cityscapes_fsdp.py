# The tiny Step-1 supernet distillation, FSDP2-sharded (fp32 so that runs can be compared exactly; the real configs
# use bf16 parameters with fp32 reduction): torchrun --standalone --nproc_per_node=2 tools/train.py THIS
# --launcher pytorch. The checkpoint mode is model_wrapper_cfg.checkpoint ('full' or 'sharded').
_base_ = ['./distill_supernet_tiny_cityscapes.py']
runner_type = 'FSDP2Runner'
model_wrapper_cfg = dict(_delete_=True, type='FSDP2Wrapper', param_dtype=None, reduce_dtype=None, checkpoint='full')
model = dict(student=dict(grad_checkpointing=True))
