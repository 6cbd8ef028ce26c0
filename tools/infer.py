"""Images, a folder or a glob + a config and checkpoint -> results (segmentation: palette PNG + overlay; depth:
colour-mapped PNG, raw disparity .npy and a 16-bit PNG), any image size, batched.

    python tools/infer.py CONFIG CHECKPOINT IMAGES... --out-dir OUT [--batch 4] [--device cpu]
    python tools/infer.py configs/depth/depthanything_large_eval.py depth_anything_v2_vitl.pth FOLDER --out-dir OUT
                                                                  (an official DepthAnythingV2 file, as it is)
    python tools/infer.py CHECKPOINT IMAGES... --out-dir OUT      (a .pth that carries its config: a tools/train.py
                                                                   checkpoint, an exported hybrid_<ARCH>_with_head.pth)
    ... --compare TEACHER_CKPT [--pca]    teacher | hybrid side by side, per-pixel difference, latency of each
                                          (<stem>_compare.png, compare.json); --pca: <stem>_pca.png of the features

<stem>: an image's path below the images' common folder, without its suffix (one folder: the file's stem; a/x.png
and b/x.png: a/x and b/x). A file in the way that this run did not write is refused before any work (--overwrite
replaces it); an input image is never overwritten.
"""
import argparse
from pathlib import Path

from jetvit_mm.cli import check_inputs, check_outputs, count, positive, run_main

CHECKPOINT_SUFFIXES = ('.pth', '.pt')


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     usage='%(prog)s [CONFIG] CHECKPOINT IMAGES... --out-dir OUT [options]')
    parser.add_argument('paths', nargs='+', metavar='[CONFIG] CHECKPOINT IMAGES',
                        help='CONFIG (left out when CHECKPOINT, a .pth, carries its config), CHECKPOINT (weights of '
                             'the config\'s model; "none" for the config\'s own), then image files, folders or glob '
                             'patterns')
    parser.add_argument('--out-dir', type=Path, required=True)
    parser.add_argument('--overwrite', action='store_true',
                        help='replace output files that exist already (refused without it; never an input image)')
    parser.add_argument('--batch', type=int, default=4, help='images per forward (not with --compare / --pca)')
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--compare', metavar='TEACHER_CKPT',
                        help='a downstream checkpoint of the same task (e.g. the teacher\'s probe): run it beside the '
                             'hybrid, built from the same config with the arch its checkpoint names')
    parser.add_argument('--pca', action='store_true',
                        help='PCA colour map of the backbone\'s last-level features (teacher | hybrid with --compare)')
    parser.add_argument('--warmup', type=count, default=1, help='warm-up rounds of the latency (--compare / --pca)')
    parser.add_argument('--repeat', type=positive, default=3, help='timed calls per model and image')
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error(f'--batch must be >= 1, got {args.batch}')
    first = args.paths[0]
    config_less = first.lower().endswith(CHECKPOINT_SUFFIXES)
    needed = 2 if config_less else 3
    if len(args.paths) < needed:
        parser.error(f'expected {"CHECKPOINT IMAGES..." if config_less else "CONFIG CHECKPOINT IMAGES..."}, got '
                     f'{len(args.paths)} path(s): {args.paths}')
    if config_less:
        args.config, args.checkpoint, args.images = None, first, args.paths[1:]
    else:
        args.config, args.checkpoint, args.images = first, args.paths[1], args.paths[2:]
    if args.checkpoint.lower() == 'none':
        args.checkpoint = None
    check_inputs(parser, args, ('config', 'checkpoint', 'compare'))
    check_outputs(parser, args, dirs=('out_dir', ))
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    from jetvit_mm.mm.apis.infer import run_inference
    from jetvit_mm.mm.apis.infer_compare import run_compare

    try:
        if args.compare or args.pca:
            written = run_compare(args.config, args.checkpoint, args.images, args.out_dir, args.compare, args.pca,
                                  args.device, args.warmup, args.repeat, overwrite=args.overwrite)
        else:
            written = run_inference(args.config, args.checkpoint, args.images, args.out_dir, args.batch,
                                    args.device, overwrite=args.overwrite)
    except (ValueError, OSError, RuntimeError) as error:
        raise SystemExit(f'error: {error}') from None
    print(f'wrote {sum(len(w) for w in written)} files for {len(written)} images to {args.out_dir}')


if __name__ == '__main__':
    run_main(main)
