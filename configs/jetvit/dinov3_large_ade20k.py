# JetViT Step 1 for DINOv3-L on ADE20K: dinov3_base_ade20k.py with the ViT-L teacher and student.
#   --cfg-options model.teacher.checkpoint=/path/to/dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth
_base_ = ['./dinov3_base_ade20k.py']

model = dict(teacher=dict(model_name='dinov3_vitl16'), student=dict(model_name='dinov3_vitl16'))
train_dataloader = dict(batch_size=2)  # 8 GPUs x 2 crops of 512x512
