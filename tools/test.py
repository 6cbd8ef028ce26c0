"""Evaluate a checkpoint with the mmengine runner and the config's evaluator.

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out metrics.json] [--cfg-options k=v ...]
"""
import argparse
import json
import os.path as osp

from mmengine.dist import is_main_process

from jetvit_mm.mm.checkpoint import check_checkpoint_fits
from jetvit_mm.mm.launch import add_common_args, build_runner, load_config


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Test (evaluate) a checkpoint with the mmengine runner')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--out', help='write the metrics to this JSON file')
    add_common_args(parser)
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    if not osp.isfile(args.checkpoint):
        raise FileNotFoundError(f'checkpoint not found: {args.checkpoint}')
    cfg = load_config(args)
    cfg.load_from = args.checkpoint
    runner = build_runner(cfg)
    check_checkpoint_fits(runner.model, args.checkpoint, osp.basename(args.config))
    metrics = runner.test()
    if args.out and is_main_process():
        with open(args.out, 'w') as f:
            json.dump({k: float(v) if hasattr(v, '__float__') else v for k, v in metrics.items()}, f, indent=2)
    return metrics


if __name__ == '__main__':
    main()
