# The tiny Cityscapes probe evaluated like configs/probe/*_cityscapes.py: the 64x128 test images (1024x2048
# scaled down 16x) are read through 32x64 sliding windows with stride 24x48 (3 x 3 windows, each overlapping
# its neighbours by a quarter), and test images are padded to whole 16-pixel patches.
_base_ = ['./seg_linear_probe_tiny_cityscapes.py']

model = dict(
    data_preprocessor=dict(test_cfg=dict(size_divisor=16)),
    test_cfg=dict(mode='slide', crop_size=(32, 64), stride=(24, 48)))
