"""The real-size configs a user runs (configs/jetvit, probe, det) train one iteration, and validate where they have
a validation loop, through ``tools/train.py`` on generated data in the datasets' real layouts and sizes.

Only the backbone is shrunk (width 32, 2-4 layers): the data pipelines, crop sizes, data preprocessors, heads,
losses, optimizers and evaluators are the shipped ones. ``test_configs.py`` builds every config; this runs them.
"""
from pathlib import Path

import pytest

from .conftest import REPO, run_tool

pytestmark = pytest.mark.integration  # every test here starts a process

CONFIGS = REPO / 'configs'
ONE_ITER = ['train_cfg.max_iters=1', 'train_dataloader.batch_size=1', 'train_dataloader.num_workers=0',
            'train_dataloader.persistent_workers=False', 'default_hooks.checkpoint.interval=1']
WITH_VAL = ['train_cfg.val_interval=1', 'val_dataloader.num_workers=0', 'val_dataloader.persistent_workers=False']


def small(*prefixes: str, depth: int = 2) -> list:
    return [f'{p}.{k}={v}' for p in prefixes for k, v in (('embed_dim', 32), ('depth', depth), ('num_heads', 2))]


@pytest.fixture(scope='module')
def data(tmp_path_factory) -> dict:
    """Real layouts at real-ish sizes: Cityscapes 1024x2048, ADE20K 512x683 (not a multiple of the patch), COCO
    480x640, NYU 480x640 (its test split) and the same images as an unlabeled folder."""
    import shutil

    from .fixtures.datasets import make_ade20k, make_cityscapes, make_coco, make_depth
    root = tmp_path_factory.mktemp('shipped')
    nyu = make_depth(root / 'nyu', splits={'train': 2, 'test': 1}, size=(480, 640), seed=0)
    unlabeled = root / 'unlabeled' / 'images'
    unlabeled.mkdir(parents=True)
    for image in (nyu / 'images' / 'train').glob('*.jpg'):
        shutil.copy(image, unlabeled)
    return dict(
        cityscapes=make_cityscapes(root / 'cityscapes', splits={'train': 2, 'val': 1}, size=(1024, 2048), seed=0),
        ade20k=make_ade20k(root / 'ade', splits={'training': 2, 'validation': 1}, size=(512, 683), seed=0),
        coco=make_coco(root / 'coco', splits={'train2017': 2, 'val2017': 1}, size=(480, 640), seed=0),
        nyu=nyu, unlabeled=unlabeled.parent)


DISTILL = small('model.teacher', 'model.student')
PROBE = small('model.backbone') + ['model.decode_head.in_channels=32'] + WITH_VAL
CASES = {
    'jetvit/dinov3_base_cityscapes.py': ('cityscapes', DISTILL),
    'jetvit/dinov3_base_cityscapes_step2.py': (  # 4 layers: the config's sampler allows up to 4 F layers
        'cityscapes', small('model.teacher', 'model.student', depth=4) + ['model.student.step1_arch=LWLW']),
    'jetvit/dinov3_large_ade20k.py': ('ade20k', DISTILL),
    'probe/dinov3_base_linear_cityscapes.py': ('cityscapes', PROBE),  # validation: the whole 1024x2048 image
    'probe/dinov3_large_linear_ade20k.py': ('ade20k', PROBE),
    'probe/dinov3_7b_linear_cityscapes.py': ('cityscapes', PROBE),  # the 7B search's scoring config, tiny backbone
    'det/mask_rcnn_jetvit_dinov3_base_hybrid_coco.py': (
        'coco', small('model.backbone') + ['model.backbone.arch=LF', 'model.neck.in_channels=32'] + WITH_VAL),
    'depth/depthanything_large_distill.py': (
        'unlabeled', small('model.teacher', 'model.student', depth=4) + ['model.distill_indices=(0,1,2,3)']),
    'depth/depthanything_large_distill_step2.py': (  # {Step-1 winner, F} per layer, at most 4 F layers per path
        'unlabeled', small('model.teacher', 'model.student', depth=4) + [
            'model.distill_indices=(0,1,2,3)', 'model.student.step1_arch=LWWL']),
    # the FSDP2 configs (7B / Giant) at tiny shapes, in one process (the wrapper applies under torchrun:
    # test_fsdp_runner.py)
    'jetvit/dinov3_7b_cityscapes.py': ('cityscapes', DISTILL),
    'jetvit/dinov3_7b_cityscapes_step2.py': (
        'cityscapes', small('model.teacher', 'model.student', depth=4) + ['model.student.step1_arch=LWLW']),
    'depth/depthanything_giant_distill.py': (
        'unlabeled', small('model.teacher', 'model.student', depth=4) + ['model.distill_indices=(0,1,2,3)']),
    'depth/depthanything_large_pseudolabel_finetune.py': (
        'unlabeled', small('model.teacher', 'model.backbone', depth=4) + WITH_VAL + [
            'model.teacher.out_indices=(0,1,2,3)', 'model.backbone.out_indices=(0,1,2,3)',
            'model.backbone.arch=LWFF', 'model.decode_head.in_channels=32']),
}


def data_roots(name: str, data: dict) -> list:
    if name == 'coco':
        root = data['coco']
        return [f'train_dataloader.dataset.data_root={root}/', f'val_dataloader.dataset.data_root={root}/',
                f'val_evaluator.ann_file={root}/annotations/instances_val2017.json']
    if name == 'unlabeled':  # the depth fine-tune validates on NYU
        return [f'train_dataloader.dataset.data_root={data["unlabeled"]}',
                f'val_dataloader.dataset.data_root={data["nyu"]}']
    return [f'train_dataloader.dataset.data_root={data[name]}', f'val_dataloader.dataset.data_root={data[name]}']


@pytest.mark.parametrize('config', list(CASES))
def test_shipped_config_trains_and_validates(config, data, tmp_path):
    dataset, options = CASES[config]
    validates = 'train_cfg.val_interval=1' in options
    roots = data_roots(dataset, data)[:None if validates else 1]  # distillation configs have no validation loop
    proc = run_tool('train.py', CONFIGS / config, '--work-dir', tmp_path, '--cfg-options', *options, *ONE_ITER, *roots)
    assert (Path(tmp_path) / 'iter_1.pth').is_file()
    assert ('Iter(val) [1/1]' in proc.stdout + proc.stderr) == validates
