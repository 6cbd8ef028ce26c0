_base_ = ['mmdet::_base_/default_runtime.py', './registry_examples.py']
