"""Export one arch of a trained supernet as a standalone JetViT checkpoint (+ downstream checkpoint, fine-tune config).

    python tools/export_hybrid.py CONFIG SUPERNET.pth --arch LWLLWWLLWFLF --out-dir D \\
        [--head-checkpoint TEACHER_PROBE.pth] [--distill-config configs/jetvit/dinov3_base_cityscapes.py] \\
        [--cfg-options model.backbone.mixers.W.window_size=8 ...]
"""
import argparse

from jetvit_mm.cli import arch_string, check_arch_letters, check_inputs, check_outputs, run_main
from jetvit_mm.mm.apis.export import export_from_checkpoint
from jetvit_mm.mm.engine.launch import ConfigOptions, read_config
from jetvit_mm.mm.search.scoring import declared_depth, declared_letters


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='downstream config whose model.backbone matches the supernet')
    parser.add_argument('checkpoint', help='supernet distillation checkpoint')
    parser.add_argument('--arch', required=True, type=arch_string,
                        help='one mixer letter per layer, of the letters CONFIG\'s backbone declares (default L, W, F)')
    parser.add_argument('--out-dir', required=True)
    parser.add_argument('--head-checkpoint',
                        help='trained downstream checkpoint of CONFIG (e.g. the teacher\'s probe): its head goes '
                             'with the hybrid into hybrid_<ARCH>_with_head.pth')
    parser.add_argument('--distill-config')
    parser.add_argument('--cfg-options', nargs='+', action=ConfigOptions,
                        help='override keys of CONFIG, e.g. model.backbone.mixers.W.window_size=8 (as tools/search.py)')
    args = parser.parse_args(argv)
    check_inputs(parser, args, ('config', 'checkpoint', 'head_checkpoint', 'distill_config'))
    check_outputs(parser, args, dirs=('out_dir', ))
    cfg = read_config(args.config, args.cfg_options, 'export_hybrid')  # a plugin's mixers imported
    check_arch_letters(parser, '--arch', args.arch, declared_letters(cfg), declared_depth(cfg))
    paths = export_from_checkpoint(cfg, args.checkpoint, args.arch, args.out_dir, args.head_checkpoint,
                                   args.distill_config)
    for kind, path in paths.items():
        print(f'{kind}: {path}')
    return paths


if __name__ == '__main__':
    run_main(main)
