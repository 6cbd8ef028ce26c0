"""The embedded default: the whole JetViT pipeline at toy size on generated data, through the real tools.

    python tools/demo.py [--work-dir work_dirs/demo]

1. generate a tiny dataset in the exact Cityscapes layout;
2. make a tiny DINOv3-architecture teacher (random weights, attention made to matter) and train its
   linear probe with tools/train.py;
3. Step-1 supernet distillation ({L, W} per layer) with tools/train.py, then tools/search.py --stage 1;
4. Step-2 supernet ({winner, F}) distillation, tools/search.py --stage 2 --export;
5. tools/test.py on the exported hybrid (mIoU from mmseg's IoUMetric) and a table of the result.
The teacher is untrained, so the figures only show that the pipeline runs; they say nothing about accuracy.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

from jetvit_mm.datasets import make_cityscapes
from jetvit_mm.models import JetViT

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / 'configs' / 'tiny' / 'seg_linear_probe_tiny_cityscapes.py'
DISTILL = REPO / 'configs' / 'tiny' / 'distill_supernet_tiny_cityscapes.py'
TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2, window_size=4)


def run(script: str, *args) -> None:
    cmd = [sys.executable, str(REPO / 'tools' / script), *map(str, args)]
    print('\n$', ' '.join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL if script == 'train.py' else None)


def make_teacher(path: Path) -> Path:
    """Random tiny DINOv3-architecture teacher; LayerScale 1 and peaky attention so attention type matters."""
    torch.manual_seed(0)
    teacher = JetViT(**TINY)
    with torch.no_grad():
        for block in teacher.blocks:
            block.ls1.gamma.fill_(1.0)
            block.ls2.gamma.fill_(1.0)
            block.attn.qkv.weight.normal_(0, 2 / teacher.embed_dim ** 0.5)
            block.attn.proj.weight.normal_(0, 1 / teacher.embed_dim ** 0.5)
    torch.save(teacher.state_dict(), path)
    return path


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--work-dir', type=Path, default=REPO / 'work_dirs' / 'demo')
    args = parser.parse_args(argv)
    work = args.work_dir.resolve()
    data = work / 'data' / 'cityscapes'
    if not (data / 'leftImg8bit').is_dir():
        make_cityscapes(data, splits={'train': 8, 'val': 4}, size=(64, 128), seed=0)
    teacher = make_teacher(work / 'teacher.pth')
    splits = [f'{s}_dataloader.dataset.data_root={data}' for s in ('train', 'val', 'test')]

    run('train.py', PROBE, '--work-dir', work / 'probe', '--cfg-options', *splits, 'model.backbone.arch=FFFF',
        f'model.backbone.checkpoint={teacher}', 'train_cfg.max_iters=40', 'train_cfg.val_interval=40',
        'default_hooks.checkpoint.interval=40')
    head = work / 'probe' / 'iter_40.pth'
    distill = ['--cfg-options', splits[0], f'model.teacher.checkpoint={teacher}', 'train_cfg.max_iters=30',
               'default_hooks.checkpoint.interval=30', 'optim_wrapper.optimizer.lr=5e-4']
    search = ['--head-checkpoint', head, '--work-dir', work / 'search', '--beam-width', '2',
              '--cfg-options', splits[1]]
    run('train.py', DISTILL, '--work-dir', work / 'step1', *distill)
    run('search.py', PROBE, work / 'step1' / 'iter_30.pth', '--stage', '1', '--min-gain', '0.0', *search)
    step1 = (work / 'search' / 'best_arch_step1.txt').read_text().strip()
    run('train.py', DISTILL, '--work-dir', work / 'step2', *distill, 'model.student.search_space=None',
        f'model.student.step1_arch={step1}')
    run('search.py', PROBE, work / 'step2' / 'iter_30.pth', '--stage', '2', '--max-full', '2', '--export',
        '--distill-config', DISTILL, *search)
    summary = json.loads((work / 'search' / 'search.json').read_text())
    best = summary['best']['2']['arch']
    metrics_file = work / 'hybrid_metrics.json'
    run('test.py', PROBE, work / 'search' / f'hybrid_{best}_with_head.pth', '--work-dir', work / 'test',
        '--out', metrics_file, '--cfg-options', f'model.backbone.arch={best}', splits[2])
    hybrid = json.loads(metrics_file.read_text())
    latency = {r['arch']: r['predicted_latency_ms'] for r in summary['archs']}
    print('\njetvit_mm demo: tiny random teacher on generated Cityscapes-layout data (figures show the pipeline runs,')
    print('not accuracy). Latency: predicted by the search\'s latency model at the val image size on this machine.')
    print(f'| {"model":<24} | {"arch":<6} | {"mIoU":>6} | {"pred. ms":>8} |')
    print(f'| {"teacher (all F)":<24} | {"FFFF":<6} | {summary["teacher_score"]:6.2f} | '
          f'{summary["teacher_latency_ms"]:8.1f} |')
    print(f'| {"Step-1 best (L/W)":<24} | {step1:<6} | {summary["best"]["1"]["score"]:6.2f} | {latency[step1]:8.1f} |')
    print(f'| {"Step-2 best (exported)":<24} | {best:<6} | {hybrid["mIoU"]:6.2f} | {latency[best]:8.1f} |')
    print(f'outputs in {work / "search"} (search.json, pareto_step*.png, layer_gains_step*.png, hybrid_*.pth)')
    return dict(summary=summary, hybrid=hybrid)


if __name__ == '__main__':
    main()
