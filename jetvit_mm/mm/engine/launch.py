"""What tools/train.py and tools/test.py wire together: config loading, resuming, the runner the config names,
evaluation of a checkpoint. Everything the runner does (hooks, data checks, CPU distributed training, safe checkpoint
loading) is declared in the config (``configs/_base_``), so mmseg's and mmdet's own tools do the same."""
import argparse
import contextlib
import difflib
import functools
import gc
import math
import os.path as osp
from typing import Iterator, Optional, Tuple

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
from jetvit_mm.process_state import set_switch

from .runner import JetViTRunner, launch_problem

LAUNCHERS = ('none', 'pytorch', 'slurm')
EXAMPLE_CONFIG = 'configs/probe/dinov3_base_linear_cityscapes.py'  # a downstream config every tool takes


class ConfigOptions(DictAction):
    """mmengine's ``--cfg-options`` action, whose items it cannot read (no ``=``, an empty key or key part, unbalanced
    brackets) are refused as argparse's usage error naming the item."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        for item in values or ():
            key, equals, value = item.partition('=')
            problem = ('it has no =' if not equals else 'its key is empty' if not key.strip() else
                       None if all(map(str.strip, key.split('.'))) else f'its key {key!r} has an empty part')
            try:
                problem or self._parse_iterable(value)
            except AssertionError:  # mmengine's check of brackets
                problem = f'its value {value!r} has unbalanced brackets'
            if problem:
                raise argparse.ArgumentError(self, f'{item!r}: {problem}; write KEY=VALUE items, e.g. '
                                                   f'train_cfg.max_iters=10 model.backbone.arch=LWLF (a list: k=[a,b])')
        super().__call__(parser, namespace, values, option_string)


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--work-dir', help='directory for logs and checkpoints (default work_dirs/<config name>)')
    parser.add_argument('--cfg-options', nargs='+', action=ConfigOptions,
                        help='override config keys, e.g. model.backbone.arch=LLWF train_cfg.max_iters=10 (a top-level '
                        'key the config lacks is refused, naming a close one, unless mmengine\'s runner reads it)')
    parser.add_argument('--launcher', choices=LAUNCHERS, default='none', help='job launcher')
    # torchrun passes --local-rank (older launchers --local_rank)
    parser.add_argument('--local_rank', '--local-rank', type=integer(minimum=0), default=0)


def check_common_args(parser: argparse.ArgumentParser, args: argparse.Namespace, files: Tuple[str, ...] = (),
                      outputs: Tuple[str, ...] = ()) -> None:
    """Before any work: the config (and the ``files`` arguments) exist, the work dir (and the ``outputs``
    arguments) can be written, the ``--launcher`` started this process; otherwise argparse's usage error names the
    argument."""
    check_inputs(parser, args, ('config', *files))
    check_outputs(parser, args, files=outputs, dirs=('work_dir', ))
    problem = launch_problem(args.launcher)
    if problem:
        parser.error(problem)


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


# What each tool reads from its config (a key set to None counts as missing): checked before any work
CONFIG_NEEDS = dict(train=('model', 'train_dataloader', 'train_cfg', 'optim_wrapper'),
                    test=('model', 'test_dataloader', 'test_cfg', 'test_evaluator'),
                    search=('model.backbone', 'val_dataloader', 'val_evaluator'), export_hybrid=('model.backbone', ))


def check_config_needs(cfg: Config, path: str, tool: str) -> None:
    """``cfg`` sets what ``tools/<tool>.py`` reads (:data:`CONFIG_NEEDS`); otherwise ValueError naming the key, and a
    distillation config given to a tool that takes a downstream one as such."""
    key = next((key for key in CONFIG_NEEDS[tool] if functools.reduce(
        lambda value, part: value.get(part) if hasattr(value, 'get') else None, key.split('.'), cfg) is None), None)
    if key is None:
        return
    distill = tool != 'train' and 'student' in (cfg.get('model') or {})
    fix = (f'it is a distillation config (model.student): tools/{tool}.py takes a downstream config whose model has a '
           'backbone' if distill else f'add it, or pass a config written for tools/{tool}.py')
    then = '; the distillation checkpoint is its CHECKPOINT argument' if distill and tool == 'search' else ''
    raise ValueError(f'{path} has no {key} (tools/{tool}.py reads {", ".join(CONFIG_NEEDS[tool])}); {fix}, e.g. '
                     f'{EXAMPLE_CONFIG}{then}')


def check_schedule(cfg: Config, path: str) -> None:
    """The training length and validation interval in ``train_cfg`` are integers >= 1 (0 failed in mmengine's
    parameter scheduler, 'end should be larger than begin'; a float or NaN later)."""
    train_cfg = cfg.get('train_cfg') or {}
    for key in ('max_iters', 'max_epochs', 'val_interval'):
        value = train_cfg.get(key, 1)  # a whole float (1e4) is taken, as mmengine takes it
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value < math.inf or value % 1:
            raise ValueError(f'{path}: train_cfg.{key}={value!r}: expected an integer >= 1; set one, e.g. '
                             f'--cfg-options train_cfg.{key}=1000')


def read_config(path: str, cfg_options: Optional[dict] = None, tool: Optional[str] = None) -> Config:
    """The one way jetvit_mm and its tools read a config: ``path`` with ``--cfg-options`` applied (a top-level key
    it lacks is refused: :func:`check_option_keys`), its ``custom_imports`` (the plugin, a plugin's mixers) imported,
    also those the options name. With ``tool``: what that tool reads is checked (:func:`check_config_needs`, for
    training :func:`check_schedule`). A file mmengine cannot read as a config is refused, naming it."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'config file not found: {path}')
    try:
        cfg = Config.fromfile(path)
    except (SyntaxError, OSError) as error:  # a typo, a missing _base_, a checkpoint in the config's place
        raise ValueError(f'{path} cannot be read as a config ({type(error).__name__}: {error}); fix it, or check '
                         f'that CONFIG comes first (a .py config)') from None
    if cfg_options:
        check_option_keys(cfg, cfg_options, path)
        cfg.merge_from_dict(cfg_options)
        import_modules_from_strings(**cfg.get('custom_imports', dict(imports=[])))
    if tool is not None:
        check_config_needs(cfg, path, tool)
    if tool == 'train':
        check_schedule(cfg, path)
    return cfg


def load_config(args: argparse.Namespace, tool: str) -> Config:
    """Read the config as ``tools/<tool>.py`` takes it (:func:`read_config`), set ``work_dir`` and the launcher."""
    cfg = read_config(args.config, args.cfg_options, tool)
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
    randomness = dict(cfg.get('randomness') or {})
    if randomness.get('seed') is not None:
        return None
    checkpoint = read(path)
    if checkpoint.meta.get('seed') is not None:
        cfg.randomness = dict(randomness, seed=checkpoint.meta['seed'])
    return None if checkpoint.meta.get('fsdp2') == 'sharded' else checkpoint


def enable_amp(cfg: Config) -> None:
    """Mixed precision with mmengine's ``AmpOptimWrapper`` (fp16, dynamic loss scale; a CUDA device: tools/train.py
    refuses ``--amp`` without one)."""
    optim_wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
    if optim_wrapper not in ('OptimWrapper', 'AmpOptimWrapper'):
        raise ValueError(f'--amp needs optim_wrapper.type OptimWrapper or AmpOptimWrapper, got {optim_wrapper}')
    cfg.optim_wrapper.type = 'AmpOptimWrapper'
    cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')


def test_checkpoint(cfg: Config, checkpoint: str, config_name: str) -> dict:
    """Evaluate ``checkpoint`` (read once) with the runner and ``cfg``'s test evaluator, refused if it does not fit
    the model (:func:`build_runner`); returns the metrics."""
    cfg.load_from = checkpoint
    return build_runner(cfg, read(checkpoint), fit_config=config_name).test()


def write_metrics(metrics: dict, path: str) -> None:
    """The metrics as JSON numbers (on the main process only), written atomically."""
    if is_main_process():
        values = {k: float(v) if hasattr(v, '__float__') else v for k, v in metrics.items()}
        write_json_atomic(path, values)
