"""The embedded default: the smallest end-to-end job that exists today.

Generates a tiny Cityscapes-layout dataset, trains the tiny linear-probe config for a few
iterations with tools/train.py and evaluates it with tools/test.py (mmseg's IoUMetric).

    python tools/demo.py [--work-dir work_dirs/demo] [--iters 20]
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

from jetvit_mm.datasets import make_cityscapes

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / 'configs' / 'tiny' / 'seg_linear_probe_tiny_cityscapes.py'


def run(script: str, *args) -> None:
    cmd = [sys.executable, str(REPO / 'tools' / script), *map(str, args)]
    print('$', ' '.join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--work-dir', type=Path, default=REPO / 'work_dirs' / 'demo')
    parser.add_argument('--iters', type=int, default=20)
    args = parser.parse_args(argv)

    data = args.work_dir / 'data' / 'cityscapes'
    if not (data / 'leftImg8bit').is_dir():
        make_cityscapes(data, splits={'train': 8, 'val': 4}, size=(64, 128), seed=0)
    options = ['--cfg-options'] + [f'{split}_dataloader.dataset.data_root={data}' for split in ('train', 'val', 'test')]
    train_dir = args.work_dir / 'train'
    run('train.py', CONFIG, '--work-dir', train_dir, *options, f'train_cfg.max_iters={args.iters}',
        f'train_cfg.val_interval={args.iters}', f'default_hooks.checkpoint.interval={args.iters}')
    metrics_file = args.work_dir / 'metrics.json'
    run('test.py', CONFIG, train_dir / f'iter_{args.iters}.pth', '--work-dir', args.work_dir / 'test',
        '--out', metrics_file, *options)
    metrics = json.loads(metrics_file.read_text())
    print('\njetvit_mm demo (tiny linear probe on generated Cityscapes-layout data)')
    print(' | '.join(f'{k}: {v:.2f}' for k, v in metrics.items()))
    print(f'metrics written to {metrics_file}')
    return metrics


if __name__ == '__main__':
    main()
