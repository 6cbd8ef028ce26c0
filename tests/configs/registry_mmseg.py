_base_ = ['mmseg::_base_/default_runtime.py', './registry_examples.py']
