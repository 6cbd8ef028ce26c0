"""The search as an mmengine object: a registered loop, and the metric's direction from mmengine's own rule (the
CheckpointHook's ``save_best`` rule, the config's ``greater_keys`` / ``less_keys``) or the metric class, not a table
kept by hand."""
import pytest
from mmengine.registry import LOOPS, DefaultScope

import jetvit_mm.mm  # noqa: F401  (registers the loop)
from jetvit_mm.mm.search import scoring as search_scoring
from jetvit_mm.mm.search.scoring import check_metric

IOU = dict(type='IoUMetric', iou_metrics=['mIoU', 'mFscore'])


def test_search_loop_is_registered_in_scope():
    """``val_cfg = dict(type='JetViTSearchLoop')`` builds under either framework's scope (their LOOPS registries
    are children of mmengine's)."""
    from mmdet.registry import LOOPS as DET_LOOPS
    from mmseg.registry import LOOPS as SEG_LOOPS
    for scope, registry in (('mmseg', SEG_LOOPS), ('mmdet', DET_LOOPS), ('mmengine', LOOPS)):
        with DefaultScope.overwrite_default_scope(scope):
            assert registry.get('JetViTSearchLoop').__module__ == 'jetvit_mm.mm.search.loop'


def test_metric_direction_is_mmengines_rule_or_the_configs():
    assert check_metric('mIoU', IOU) is True and check_metric('coco/bbox_mAP', dict(type='CocoMetric')) is True
    assert check_metric('distill_loss', IOU) is False
    # mFscore is not among mmengine's keys: refused, naming the fix; the config's checkpoint hook declares it
    with pytest.raises(ValueError, match=r"no declared direction.*greater_keys=\['mFscore'\]"):
        check_metric('mFscore', IOU)
    assert check_metric('mFscore', IOU, dict(greater_keys=['mFscore'])) is True
    # the config's keys replace mmengine's defaults, as they do for the CheckpointHook's save_best
    assert check_metric('mIoU', IOU, dict(greater_keys=['mAcc'], less_keys=['mIoU'])) is False


def test_no_hand_kept_direction_table_nor_dead_helper():
    assert not hasattr(search_scoring, 'METRIC_DIRECTIONS') and not hasattr(search_scoring, 'signed')
