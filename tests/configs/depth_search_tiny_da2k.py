# The tiny depth model scored by DA-2K pair accuracy on a generated DA-2K-layout benchmark: what the tests' search
# scores archs with (tools/search.py --metric da2k_acc) and what tools/test.py reports. Structure of
# configs/depth/depthanything_large_search_da2k.py.
_base_ = ['./depth_eval_tiny_nyu.py']

data_root = 'data/tiny_da2k'
da2k_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='DepthAnythingResize', size=56),
    dict(type='PackSegInputs',
         meta_keys=('img_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor', 'da2k_pairs')),
]
val_dataloader = dict(dataset=dict(_delete_=True, type='DA2KDataset', data_root=data_root, pipeline=da2k_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(_delete_=True, type='DA2KMetric')
test_evaluator = val_evaluator
