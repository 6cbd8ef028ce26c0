"""Export a JetViT (hybrid or teacher), with or without its head, to ONNX with dynamic batch, height and width.

    python tools/export_onnx.py CONFIG CHECKPOINT --out model.onnx [--part model|backbone]

``--part model``: the backbone and the config's head (a segmentor's decode head: logits on the patch grid; a depth
estimator's DPT head: disparity; a detector's neck: the feature pyramid); ``--part backbone``: the JetViT's feature
maps. Inputs: ``image`` ``[B, 3, H, W]``, fp32, normalised as the config's data preprocessor does, H and W
multiples of the patch size. The export is checked against torch in onnxruntime at a size and batch other than the
trace's; outputs with NaN or inf fail the check (torch's before anything is written). ``--out`` is tried before the
export (a file is created there and removed) and written atomically. Needs the deploy extra: ``pip install -e
.[deploy]``.
"""
import argparse
import os.path as osp
import sys

import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from jetvit_mm.cli import check_inputs, check_outputs, positive  # noqa: E402
from jetvit_mm.deploy import check_finite, check_writable, compare_outputs, export_onnx, onnx_session, run_onnx  # noqa: E402
from jetvit_mm.mm.onnx_model import PARTS, build_export_module  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('checkpoint', nargs='?', help='weights for the config\'s model (none: as built)')
    parser.add_argument('--out', required=True, help='the .onnx file to write')
    parser.add_argument('--part', default='model', choices=PARTS)
    parser.add_argument('--check-grid', type=positive, nargs=2, default=(3, 4), metavar=('ROWS', 'COLS'),
                        help='patch grid of the onnxruntime-vs-torch check (default 3 4)')
    args = parser.parse_args(argv)
    check_inputs(parser, args, ('config', 'checkpoint'))
    check_outputs(parser, args, files=('out', ))
    try:
        check_writable(args.out)  # os.access above trusts permission bits: write a file there
    except ValueError as error:
        parser.error(f'--out {error}')
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    module, patch = build_export_module(args.config, args.checkpoint, args.part)
    rows, cols = args.check_grid
    image = torch.randn(1, 3, rows * patch, cols * patch)
    with torch.no_grad():
        expected = module(image)
    try:
        check_finite(expected, 'torch')  # before anything is written
    except ValueError as error:
        raise SystemExit(f'error: nothing exported: {error}') from None
    path = export_onnx(module, args.out, patch)
    session = onnx_session(path)
    try:
        worst = compare_outputs(run_onnx(session, image), expected, [o.name for o in session.get_outputs()])
    except ValueError as error:
        raise SystemExit(f'error: the export {path} fails the check against torch: {error}') from None
    print(f'wrote {path} ({len(expected)} output(s)); onnxruntime vs torch at 1x{rows * patch}x{cols * patch}: '
          f'max relative difference {worst:.2e}')
    if worst > 1e-4:
        raise SystemExit(f'the export does not match torch (max relative difference {worst:.2e} > 1e-4)')


if __name__ == '__main__':
    main()
