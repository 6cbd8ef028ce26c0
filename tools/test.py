"""Evaluate a checkpoint with the mmengine runner and the config's evaluator.

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out metrics.json] [--cfg-options k=v ...]
"""
import argparse
import os.path as osp

from jetvit_mm.cli import run_main
from jetvit_mm.mm.engine.launch import (
    add_common_args,
    check_common_args,
    load_config,
    process_group_teardown,
    test_checkpoint,
    write_metrics,
)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Test (evaluate) a checkpoint with the mmengine runner')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--out', help='write the metrics to this JSON file (written atomically, folders created)')
    add_common_args(parser)
    args = parser.parse_args(argv)
    check_common_args(parser, args, files=('checkpoint', ), outputs=('out', ))
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    with process_group_teardown():
        metrics = test_checkpoint(load_config(args, 'test'), args.checkpoint, osp.basename(args.config))
        if args.out:
            write_metrics(metrics, args.out)
    return metrics


if __name__ == '__main__':
    run_main(main)
