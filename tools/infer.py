"""Images, a folder or a glob + a config and checkpoint -> results (segmentation: palette PNG + overlay; depth:
colour-mapped PNG, raw disparity .npy and a 16-bit PNG), any image size, batched.

    python tools/infer.py CONFIG CHECKPOINT IMAGES... --out-dir OUT [--batch 4] [--device cpu]
"""
import argparse
import os.path as osp
import sys
from pathlib import Path

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from jetvit_mm.cli import check_inputs, check_outputs  # noqa: E402
from jetvit_mm.mm.infer import run_inference  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('checkpoint', help='weights of the config\'s model; "none" for the config\'s own')
    parser.add_argument('images', nargs='+', help='image files, folders or glob patterns')
    parser.add_argument('--out-dir', type=Path, required=True)
    parser.add_argument('--batch', type=int, default=4)
    parser.add_argument('--device', default='cpu')
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error(f'--batch must be >= 1, got {args.batch}')
    check_inputs(parser, args, ('config', ) if args.checkpoint.lower() == 'none' else ('config', 'checkpoint'))
    check_outputs(parser, args, dirs=('out_dir', ))
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    checkpoint = None if args.checkpoint.lower() == 'none' else args.checkpoint
    try:
        written = run_inference(args.config, checkpoint, args.images, args.out_dir, args.batch, args.device)
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        raise SystemExit(f'error: {error}') from None
    print(f'wrote {sum(len(w) for w in written)} files for {len(written)} images to {args.out_dir}')


if __name__ == '__main__':
    main()
