"""Export a JetViT (hybrid or teacher), with or without its head, to ONNX with dynamic batch, height and width.

    python tools/export_onnx.py CONFIG CHECKPOINT --out model.onnx [--part model|backbone]
                                [--fixed-size H W [--batch N]]

``--part model``: the backbone and the config's head (a segmentor's decode head: logits on the patch grid; a depth
estimator's DPT head: disparity; a detector's neck: the feature pyramid); ``--part backbone``: the JetViT's feature
maps. Inputs: ``image`` ``[B, 3, H, W]``, fp32, normalised as the config's data preprocessor does, H and W
multiples of the patch size. ``--fixed-size H W``: the deployment export, at that input size and ``--batch``
(default 1) only: its W layers keep their windows and cost window attention, and each squeeze conv is one grouped
conv; without it a W layer is exported as masked full attention (any size, full attention's cost) and the squeeze
conv as shifted products.

The export is checked against torch in onnxruntime on a grid larger than the model's window and a batch other than
the trace's (with ``--fixed-size``: at that size and batch, the only shape the graph takes); outputs with NaN or
inf fail the check (torch's before anything is written). ``--out`` is tried before the export (a file is created
there and removed) and written atomically. Needs the deploy extra: ``pip install -e .[deploy]``.
"""
import argparse

import torch

from jetvit_mm.cli import check_inputs, check_outputs, positive, run_main
from jetvit_mm.deploy import check_finite, check_writable, compare_outputs, export_onnx, onnx_session, run_onnx
from jetvit_mm.mm.apis.onnx_model import PARTS, build_export_module


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config', help='the model\'s config (segmentor, depth estimator or detector)')
    parser.add_argument('checkpoint', nargs='?', help='weights for the config\'s model (none: as built)')
    parser.add_argument('--out', required=True, help='the .onnx file to write')
    parser.add_argument('--part', default='model', choices=PARTS,
                        help='model: the backbone and the config\'s head (or neck); backbone: the JetViT\'s '
                        'feature maps only')
    parser.add_argument('--fixed-size', type=positive, nargs=2, default=None, metavar=('H', 'W'),
                        help='export for this input size only (pixels, multiples of the patch): W layers keep their '
                        'windows (the deployment export of a W hybrid)')
    parser.add_argument('--batch', type=positive, default=None,
                        help='with --fixed-size: the number of images the graph takes (default 1; every dimension of '
                        'a fixed-size export is static)')
    parser.add_argument('--check-grid', type=positive, nargs=2, default=None, metavar=('ROWS', 'COLS'),
                        help='patch grid of the onnxruntime-vs-torch check (default: the fixed size, or two windows '
                        'and one patch down, one window and three patches across)')
    args = parser.parse_args(argv)
    if args.batch is not None and args.fixed_size is None:
        parser.error('--batch sets the batch of a --fixed-size export; without --fixed-size the batch is dynamic')
    if args.fixed_size is not None and args.check_grid is not None:
        parser.error('--check-grid: a --fixed-size export takes one input size, so it is checked at that size')
    check_inputs(parser, args, ('config', 'checkpoint'))
    check_outputs(parser, args, files=('out', ))
    try:
        check_writable(args.out)  # os.access above trusts permission bits: write a file there
    except ValueError as error:
        parser.error(f'--out {error}')
    return args


def check_grid(args: argparse.Namespace, module: torch.nn.Module, patch: int):
    """The patch grid of the check: ``--check-grid``, else the fixed size, else a grid larger than the window (so the
    exported windows, their padding and the prefix tokens are all exercised)."""
    if args.check_grid is not None:
        return tuple(args.check_grid)
    if args.fixed_size is not None:
        return args.fixed_size[0] // patch, args.fixed_size[1] // patch
    windows = [m.window_size for m in module.modules() if hasattr(m, 'window_size') and isinstance(m.window_size, int)]
    window = max(windows, default=4)
    return 2 * window + 1, window + 3


def main(argv=None) -> None:
    args = parse_args(argv)
    module, patch = build_export_module(args.config, args.checkpoint, args.part)
    if args.fixed_size is not None and any(side % patch for side in args.fixed_size):
        raise SystemExit(f'error: --fixed-size {args.fixed_size[0]} {args.fixed_size[1]}: both sides must be '
                         f'multiples of the patch size {patch}')
    rows, cols = check_grid(args, module, patch)
    # dynamic: a batch the trace (2 images) did not see; fixed size: the graph's batch
    image = torch.randn(3 if args.fixed_size is None else args.batch or 1, 3, rows * patch, cols * patch)
    with torch.no_grad():
        expected = module(image)
    try:
        check_finite(expected, 'torch')  # before anything is written
    except ValueError as error:
        raise SystemExit(f'error: nothing exported: {error}') from None
    path = export_onnx(module, args.out, patch, fixed_size=args.fixed_size, batch=args.batch or 1)
    session = onnx_session(path)
    try:
        worst = compare_outputs(run_onnx(session, image), expected, [o.name for o in session.get_outputs()])
    except ValueError as error:
        raise SystemExit(f'error: the export {path} fails the check against torch: {error}') from None
    print(f'wrote {path} ({len(expected)} output(s)); onnxruntime vs torch at {len(image)}x{rows * patch}x'
          f'{cols * patch}: '
          f'max relative difference {worst:.2e}')
    if worst > 1e-4:
        raise SystemExit(f'the export does not match torch (max relative difference {worst:.2e} > 1e-4)')


if __name__ == '__main__':
    run_main(main)
