"""Every shipped config pads test images to the backbone's patch grid, as mmseg's own ViT configs do: its data
preprocessor, built and run in test mode on an image of an odd size, hands the model whole patches. The size hint
a JetViT gives for a bad input names the option that does this."""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

from jetvit_mm.models import JetViT
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.variants import get_variant

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p for p in (REPO / 'configs').glob('*/*.py') if p.parent.name != '_base_')


def _backbone(model: dict) -> dict:
    return model.get('student') or model.get('backbone') or model


@pytest.mark.parametrize('path', SHIPPED, ids=lambda p: f'{p.parent.name}/{p.stem}')
def test_shipped_config_pads_test_images_to_the_patch_grid(path):
    import importlib

    cfg = Config.fromfile(path)
    patch = get_variant(_backbone(cfg.model).get('model_name')).patch_size
    preprocessor = cfg.model.data_preprocessor
    scope = cfg.get('default_scope', 'mmseg')
    registry = importlib.import_module(f'{scope}.registry').MODELS
    with DefaultScope.overwrite_default_scope(scope):
        built = registry.build(preprocessor)
    from mmengine.structures import InstanceData  # noqa: F401  (mmdet's samples)

    sample = importlib.import_module(f'{scope}.structures').__dict__['SegDataSample' if scope == 'mmseg'
                                                                      else 'DetDataSample']()
    h, w = 3 * patch + 5, 7 * patch + 3  # not a multiple of the patch (nor of 32)
    sample.set_metainfo(dict(img_shape=(h, w), ori_shape=(h, w)))
    out = built(dict(inputs=[torch.randint(0, 255, (3, h, w), dtype=torch.uint8)], data_samples=[sample]),
                training=False)
    H, W = out['inputs'].shape[-2:]
    assert H % patch == 0 and W % patch == 0, f'{path.name}: test input {H}x{W} is not a multiple of {patch}'
    assert (H, W) != (h, w)


def test_size_hint_names_the_option_that_works():
    model = JetViT(model_name='dinov3_vits16', arch='LF', embed_dim=32, depth=2, num_heads=2,
                   mixers=default_mixers(W=dict(window_size=4)))
    with pytest.raises(ValueError, match=r'test_cfg=dict\(size_divisor=16\)') as error:
        model(torch.zeros(1, 3, 40, 48))
    assert 'pad_size_divisor' in str(error.value)
