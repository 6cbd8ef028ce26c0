"""Convert an official DepthAnythingV2 checkpoint into the mmseg layout this project's depth configs use.

    python tools/convert_depth_anything.py depth_anything_v2_vitl.pth work_dirs/depth_anything_v2_vitl_mmseg.pth

The output (``backbone.*`` in JetViT names + ``decode_head.*`` in the original DPT names) is what
``tools/test.py CONFIG CHECKPOINT`` and ``tools/search.py --head-checkpoint`` read. The input is loaded safely.
"""
import argparse

from jetvit_mm.cli import check_inputs, check_outputs, run_main
from jetvit_mm.models.depth_anything import export_mmseg_checkpoint


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', help='official DepthAnythingV2 .pth (pretrained.* + depth_head.*)')
    parser.add_argument('dst', help='output checkpoint for configs/depth/depthanything_*.py')
    args = parser.parse_args(argv)
    check_inputs(parser, args, ('src', ))
    check_outputs(parser, args, files=('dst', ))
    print(export_mmseg_checkpoint(args.src, args.dst))


if __name__ == '__main__':
    run_main(main)
