# One buildable example per type jetvit_mm registers in MODELS (tests/test_registry.py builds each
# under the mmseg and the mmdet default scope and fails if a registered type has no example here).
custom_imports = dict(imports=['jetvit_mm.mm'], allow_failed_imports=False)
examples = dict(
    LinearProbeHead=dict(type='LinearProbeHead', in_channels=16, num_classes=5),
)
