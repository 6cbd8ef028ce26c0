"""Evaluate a checkpoint with the mmengine runner and the config's evaluator.

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out metrics.json] [--cfg-options k=v ...]
"""
import argparse
import os.path as osp

from jetvit_mm.mm.launch import add_common_args, load_config, test_checkpoint, write_metrics


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Test (evaluate) a checkpoint with the mmengine runner')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--out', help='write the metrics to this JSON file')
    add_common_args(parser)
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    metrics = test_checkpoint(load_config(args), args.checkpoint, osp.basename(args.config))
    if args.out:
        write_metrics(metrics, args.out)
    return metrics


if __name__ == '__main__':
    main()
