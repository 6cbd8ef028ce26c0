"""What tools/train.py and tools/test.py wire together: config loading, resuming, the runner the config names,
evaluation of a checkpoint. Everything the runner does (hooks, data checks, CPU distributed training, safe checkpoint
loading) is declared in the config (``configs/_base_``), so mmseg's and mmdet's own tools do the same."""
import argparse
import atexit
import contextlib
import difflib
import gc
import os
import os.path as osp
import sys
from typing import Callable, Iterator, Optional, Tuple

import torch
from mmengine.config import Config, DictAction
from mmengine.dist import is_main_process
from mmengine.model import is_model_wrapper
from mmengine.registry import RUNNERS
from mmengine.runner import Runner
from mmengine.utils import import_modules_from_strings

from jetvit_mm.cli import check_inputs, check_outputs, integer
from jetvit_mm.jsonio import write_json_atomic
from jetvit_mm.models.checkpoint import Checkpoint, apply_checkpoint, read
from jetvit_mm.process_state import set_switch, switch

from .runner import JetViTRunner

LAUNCHERS = ('none', 'pytorch', 'slurm')


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--work-dir', help='directory for logs and checkpoints (default work_dirs/<config name>)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config keys, e.g. model.backbone.arch=LLWF train_cfg.max_iters=10 (a top-level '
                        'key the config lacks is refused, naming a close one, unless mmengine\'s runner reads it)')
    parser.add_argument('--launcher', choices=LAUNCHERS, default='none', help='job launcher')
    # torchrun passes --local-rank (older launchers --local_rank)
    parser.add_argument('--local_rank', '--local-rank', type=integer(minimum=0), default=0)


def check_common_args(parser: argparse.ArgumentParser, args: argparse.Namespace, files: Tuple[str, ...] = (),
                      outputs: Tuple[str, ...] = ()) -> None:
    """Before any work: the config (and the ``files`` arguments) exist, the work dir (and the ``outputs``
    arguments) can be written; otherwise argparse's usage error names the argument."""
    check_inputs(parser, args, ('config', *files))
    check_outputs(parser, args, files=outputs, dirs=('work_dir', ))


# Top-level keys mmengine's Runner (``from_cfg``, ``wrap_model``, ``train``), its FlexibleRunner, mmseg's / mmdet's
# tools (test-time augmentation) and this project's tools read although a config may not set them: an option may add
# one. Any other top-level key a config lacks is read by nothing.
RUNTIME_KEYS = ('model', 'work_dir', 'train_dataloader', 'val_dataloader', 'test_dataloader', 'train_cfg', 'val_cfg',
                'test_cfg', 'auto_scale_lr', 'optim_wrapper', 'param_scheduler', 'val_evaluator', 'test_evaluator',
                'default_hooks', 'custom_hooks', 'data_preprocessor', 'load_from', 'resume', 'launcher', 'env_cfg',
                'log_processor', 'log_level', 'visualizer', 'default_scope', 'randomness', 'experiment_name',
                'model_wrapper_cfg', 'custom_imports', 'runner_type', 'compile', 'strategy', 'sync_bn',
                'find_unused_parameters', 'activation_checkpointing', 'efficient_conv_bn_eval', 'tta_model',
                'tta_pipeline')


def check_option_keys(cfg: Config, cfg_options: dict, path: str) -> None:
    """Refuse a ``--cfg-options`` key whose first part is no top-level key of ``cfg`` nor one the runner reads
    (:data:`RUNTIME_KEYS`): ``randomnes.seed=3`` would be merged as a new key and silently ignored. Keys below the
    top level may be new (a dict of a model's arguments takes new ones)."""
    valid = sorted(set(cfg.keys()) | set(RUNTIME_KEYS))
    for key in cfg_options:
        first = str(key).split('.')[0]
        if first in valid:
            continue
        close = difflib.get_close_matches(first, valid, n=1)
        hint = f'did you mean {close[0]!r} ({str(key).replace(first, close[0], 1)}=...)? ' if close else ''
        raise ValueError(f'--cfg-options {key}=...: {path} has no top-level key {first!r} and the runner reads none '
                         f'of that name, so the option would be ignored; {hint}the config\'s keys: '
                         f'{", ".join(k for k in valid if k in cfg)}')


def read_config(path: str, cfg_options: Optional[dict] = None) -> Config:
    """The one way jetvit_mm and its tools read a config: ``path`` with ``--cfg-options`` applied (a top-level key
    it lacks is refused: :func:`check_option_keys`), its ``custom_imports`` (the plugin, a plugin's mixers) imported,
    also those the options name."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'config file not found: {path}')
    cfg = Config.fromfile(path)
    if cfg_options:
        check_option_keys(cfg, cfg_options, path)
        cfg.merge_from_dict(cfg_options)
        import_modules_from_strings(**cfg.get('custom_imports', dict(imports=[])))
    return cfg


def load_config(args: argparse.Namespace) -> Config:
    """Read the config (:func:`read_config`), set ``work_dir`` and the launcher."""
    cfg = read_config(args.config, args.cfg_options)
    cfg.launcher = args.launcher
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
    return cfg


@contextlib.contextmanager
def process_group_teardown() -> Iterator[None]:
    """Destroy the default process group when the block ends, on success and on error, whoever started it (the CPU
    gloo group above, mmengine's ``init_dist``). On success the ranks first meet at a barrier, so that none tears
    its connections down while another still uses them. A process that exits with the group alive, or while a peer
    still talks to it, can abort in gloo's threads ("terminate called without an active exception"). What the block
    left unreachable (a runner's model, whose FSDP2 hooks hold it in reference cycles) is collected before the group
    goes, not at exit (where the FSDP2 model of the GPU check's NCCL step held its process over 10 s)."""
    try:
        yield
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.barrier()
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            gc.collect()
            torch.distributed.destroy_process_group()
            set_switch('group_torn_down', True)


def run_main(main: Callable[[], object], leave: Callable[[int], None] = os._exit) -> None:
    """Run a tool's ``main`` (``if __name__ == '__main__': run_main(main)``). After a distributed run whose group
    :func:`process_group_teardown` destroyed, the process leaves once the exit handlers have run and the output is
    flushed, without the interpreter's finalization: once DDP has wrapped a model, the gloo group's worker threads
    outlive ``destroy_process_group`` (and the DDP object), and a worker that drops its last work's tensors while
    the interpreter finalizes cannot take the GIL and aborts the rank ("terminate called without an active
    exception", SIGABRT; seen in 4 of about 300 two-rank CPU runs under load, after every checkpoint was written).
    Errors propagate as usual; a run without a group exits as usual."""
    set_switch('group_torn_down', False)
    main()
    if switch('group_torn_down'):
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        leave(0)


def build_runner(cfg: Config, checkpoint: Optional[Checkpoint] = None, fit_config: Optional[str] = None) -> Runner:
    """The runner ``cfg`` names, built as mmseg's and mmdet's own ``tools/train.py`` build it: ``runner_type``
    (``configs/_base_``: :class:`~jetvit_mm.mm.engine.runner.JetViTRunner`, or ``FSDP2Runner`` next to an FSDP2
    wrapper) from mmengine's ``RUNNERS``, else mmengine's ``Runner``. ``checkpoint``: the file it loads, read
    already; ``fit_config``: it must fit the model of that config (mmengine's ``load_from`` would only warn)."""
    runner = RUNNERS.build(cfg) if 'runner_type' in cfg else Runner.from_cfg(cfg)
    if isinstance(runner, JetViTRunner):
        runner.given_checkpoint, runner.fit_config = checkpoint, fit_config
    elif checkpoint is not None and fit_config is not None:  # mmengine's own runner reads the file again
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        apply_checkpoint(model, checkpoint, allow_unexpected=True, load=False, target=f'the model of {fit_config}')
    return runner


def latest_checkpoint(work_dir: str) -> Optional[str]:
    """The checkpoint ``work_dir/last_checkpoint`` names (mmengine writes it after each save); None when there is
    none (nothing saved yet). A damaged marker (unreadable, empty, naming no file) is refused, naming it."""
    marker = osp.join(work_dir, 'last_checkpoint')
    if not osp.exists(marker):
        return None
    fix = 'fix it, delete it to start afresh, or pass --resume CKPT'
    try:
        with open(marker, encoding='utf-8') as f:
            path = f.read().strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f'{marker} cannot be read ({type(error).__name__}: {error}): it should hold the path of '
                         f'the latest checkpoint; {fix}') from None
    if not path or '\n' in path:
        raise ValueError(f'{marker} holds {path!r}, not the path of one checkpoint file; {fix}')
    if not osp.isfile(path):
        raise FileNotFoundError(f'{marker} names {path!r}, which is not a file; {fix}')
    return path


RESUME_KEYS = ('load_from', 'resume')


def check_resume_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--resume [CKPT]`` decides where training continues from: a ``--cfg-options`` ``load_from`` or ``resume``
    next to it would be overridden or ignored (mmengine would silently train from iteration 0), so it is refused;
    ``--resume CKPT`` must be a file."""
    if args.resume is None:
        return
    given = [k for k in RESUME_KEYS if k in (args.cfg_options or {})]
    if given:
        parser.error(f'--resume and --cfg-options {" ".join(f"{k}=..." for k in given)} conflict: --resume CKPT '
                     f'continues that checkpoint, --resume alone the work dir\'s latest; load_from=CKPT without '
                     f'--resume starts a new run from those weights. Pass one of them')
    if args.resume != 'auto' and not osp.isfile(args.resume):
        parser.error(f'--resume {args.resume}: checkpoint file not found')


def set_resume(cfg: Config, resume: Optional[str]) -> Optional[Checkpoint]:
    """``--resume`` alone: the latest checkpoint in work_dir; ``--resume CKPT``: that file.

    A config without ``randomness.seed`` takes the resumed run's seed. mmengine restores it only after the train
    dataloader's sampler has been seeded, so a resumed run would otherwise see the images in another order. Returns
    the checkpoint when it was read for its seed, for the runner to resume from (:func:`build_runner`); not a sharded
    FSDP2 one, whose shards each rank loads when the run resumes.
    """
    if resume is None:
        return None
    cfg.resume = True
    cfg.load_from = None if resume == 'auto' else resume
    path = latest_checkpoint(cfg.work_dir) if resume == 'auto' else resume
    if path is None:
        return None  # 'auto' with nothing saved starts afresh
    if not osp.isfile(path):
        raise FileNotFoundError(f'--resume {path}: checkpoint not found')
    randomness = dict(cfg.get('randomness') or {})
    if randomness.get('seed') is not None:
        return None
    checkpoint = read(path)
    if checkpoint.meta.get('seed') is not None:
        cfg.randomness = dict(randomness, seed=checkpoint.meta['seed'])
    return None if checkpoint.meta.get('fsdp2') == 'sharded' else checkpoint


def enable_amp(cfg: Config) -> None:
    """Mixed precision with mmengine's ``AmpOptimWrapper`` (fp16, dynamic loss scale)."""
    if not torch.cuda.is_available():
        raise RuntimeError('--amp needs a CUDA device: mmengine\'s AmpOptimWrapper runs on GPU/NPU/MLU only; '
                           'drop --amp to train in fp32 on the CPU')
    optim_wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
    if optim_wrapper not in ('OptimWrapper', 'AmpOptimWrapper'):
        raise ValueError(f'--amp needs optim_wrapper.type OptimWrapper or AmpOptimWrapper, got {optim_wrapper}')
    cfg.optim_wrapper.type = 'AmpOptimWrapper'
    cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')


def test_checkpoint(cfg: Config, checkpoint: str, config_name: str) -> dict:
    """Evaluate ``checkpoint`` (read once) with the runner and ``cfg``'s test evaluator, refused if it does not fit
    the model (:func:`build_runner`); returns the metrics."""
    if not osp.isfile(checkpoint):
        raise FileNotFoundError(f'checkpoint not found: {checkpoint}')
    cfg.load_from = checkpoint
    return build_runner(cfg, read(checkpoint), fit_config=config_name).test()


def write_metrics(metrics: dict, path: str) -> None:
    """The metrics as JSON numbers (on the main process only), written atomically."""
    if is_main_process():
        values = {k: float(v) if hasattr(v, '__float__') else v for k, v in metrics.items()}
        write_json_atomic(path, values)
