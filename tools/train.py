"""Train with the mmengine runner: mmseg- and mmdet-based configs alike.

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]] [--amp] [--cfg-options k=v ...]
    torchrun --nproc_per_node=N tools/train.py CONFIG --launcher pytorch
"""
import argparse

import torch

from jetvit_mm.cli import run_main
from jetvit_mm.mm.engine.launch import (
    add_common_args,
    build_runner,
    check_common_args,
    check_resume_args,
    enable_amp,
    load_config,
    process_group_teardown,
    set_resume,
)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Train a model with the mmengine runner')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--resume', nargs='?', const='auto', default=None,
                        help='resume from CKPT, or from the latest checkpoint in the work dir if no CKPT is given')
    parser.add_argument('--amp', action='store_true', help='automatic mixed precision training')
    add_common_args(parser)
    args = parser.parse_args(argv)
    check_common_args(parser, args)
    check_resume_args(parser, args)
    if args.amp and not torch.cuda.is_available():
        parser.error('--amp needs a CUDA device: mmengine\'s AmpOptimWrapper runs on GPU/NPU/MLU only; drop --amp to '
                     'train in fp32 on the CPU')
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    with process_group_teardown():
        cfg = load_config(args, 'train')
        if args.amp:
            enable_amp(cfg)
        runner = build_runner(cfg, set_resume(cfg, args.resume))  # a checkpoint read for its seed is read once
        runner.train()
        del runner  # freed (its model, DDP / FSDP2 state) before the process group goes


if __name__ == '__main__':
    run_main(main)
