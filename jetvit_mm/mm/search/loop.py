"""The two-stage supernet search as an mmengine loop (``val_cfg = dict(type='JetViTSearchLoop', ...)``), run by
``runner.val()``: the runner builds the config's own ``val_dataloader`` (its distributed sampler under a launcher)
and ``val_evaluator``; the loop loads the supernet and the teacher's head, drives the pure beam search
(:func:`jetvit_mm.search.run.run_stage`) and keeps the resumable state file.

Distributed (``--launcher pytorch``): every process scores every arch over its split of the val set and the
evaluator collects the results, so each process gets the same score and the beam search walks the same archs on
every rank; rank 0 alone reads the saved state (sent to the others), measures the latency table (sent too) and
writes the state and the outputs.
"""
import copy
import dataclasses
import functools
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, TypeVar, Union

import torch
from mmengine.dist import broadcast_object_list, is_main_process
from mmengine.model import is_model_wrapper
from mmengine.registry import LOOPS
from mmengine.runner import BaseLoop
from torch.utils.data import DataLoader

from jetvit_mm.models.checkpoint import Checkpoint, read
from jetvit_mm.search.latency import load_or_measure, read_latency_table
from jetvit_mm.search.run import SearchSettings, open_state, plot_stage, run_stage, start_arch
from jetvit_mm.search.state import write_json_atomic

from ..apis.export import export_hybrid
from .identity import IDENTITY_NAMES, agreed_identity, search_identity, val_content_fingerprint
from .scoring import (
    DownstreamScorer,
    config_metric_direction,
    declared_letters,
    default_thresholds,
    load_supernet,
    prepare_downstream_model,
    saved_distill_objective,
)

__all__ = ['JetViTSearchLoop']

T = TypeVar('T')


def on_main_process(fn: Callable[[], T]) -> T:
    """``fn()`` run by rank 0 only, its result (or its error, raised on every rank) sent to every process."""
    result: list = [None, None]
    if is_main_process():
        try:
            result[0] = fn()
        except Exception as error:  # noqa: BLE001  (re-raised below, on every rank)
            result[1] = error
    broadcast_object_list(result)
    if result[1] is not None:
        raise result[1]
    return result[0]


@LOOPS.register_module()
class JetViTSearchLoop(BaseLoop):
    """One stage of the beam search of a supernet distillation ``checkpoint``, scored with the config's
    ``val_dataloader`` / ``val_evaluator`` (the options are those of ``tools/search.py``); ``run()`` returns the
    summary written to ``search.json`` in ``work_dir`` (default: the runner's)."""

    def __init__(self, runner, dataloader: Union[DataLoader, Dict], evaluator: Any, checkpoint: str, stage: int = 1,
                 metric: str = 'mIoU', head_checkpoint: Optional[str] = None, beam_width: int = 4,
                 min_gain: Optional[float] = None, tolerance: Optional[float] = None, max_full: Optional[int] = None,
                 latency_budget: Optional[float] = None, latency_size: Optional[Sequence[int]] = None,
                 latency_table: Optional[str] = None, step1_order: Optional[str] = None,
                 step1_arch: Optional[str] = None, seed: int = 0, resume: bool = False,
                 device: Optional[str] = None, work_dir: Optional[str] = None, export: bool = False,
                 distill_config: Optional[str] = None) -> None:
        super().__init__(runner, dataloader)
        self.higher_is_better = config_metric_direction(metric, runner.cfg)  # a bad --metric: named, before work
        self.evaluator = None if metric == 'distill_loss' else runner.build_evaluator(evaluator)
        default_gain, default_tolerance = default_thresholds(metric)
        self.settings = SearchSettings(
            stage=stage, metric=metric, higher_is_better=self.higher_is_better, beam_width=beam_width,
            min_gain=default_gain if min_gain is None else min_gain,
            tolerance=default_tolerance if tolerance is None else tolerance, max_full=max_full,
            latency_budget=latency_budget, seed=seed, order=step1_order)
        self.checkpoint, self.head_checkpoint = str(checkpoint), head_checkpoint
        self.latency_size = tuple(latency_size) if latency_size else None
        self.latency_table, self.step1_arch, self.resume = latency_table, step1_arch, resume
        self.device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
        self.work_dir = Path(work_dir or runner.work_dir)
        self.export, self.distill_config = export, distill_config

    @property
    def state_path(self) -> Path:
        return self.work_dir / 'search_state.json'

    def run(self) -> Dict[str, Any]:
        """Check every input, then search (or resume) the stage; returns ``search.json``'s summary."""
        cfg, settings = self.runner.cfg, self.settings
        given = None if self.latency_table is None else read_latency_table(Path(self.latency_table),
                                                                           declared_letters(cfg))
        supernet_file = read(self.checkpoint)  # each checkpoint read once: compared, loaded, exported
        head = None if self.head_checkpoint is None else read(self.head_checkpoint)
        identity = agreed_identity(  # by content; every rank's the same, or every rank stops here
            functools.partial(search_identity, cfg, settings.metric, supernet_file, head),
            lambda: dict(val_content=val_content_fingerprint(cfg), **self._options(given)))
        state = on_main_process(lambda: open_state(self.state_path, settings.stage, identity, self.resume,
                                                   IDENTITY_NAMES))
        # the paths too, for the record only (not compared on resume)
        record = dict(identity, checkpoint=self.checkpoint, head_checkpoint=self.head_checkpoint)
        supernet, teacher = load_supernet(supernet_file, cfg)
        scorer = self._scorer(supernet, teacher, saved_distill_objective(supernet_file), head)
        del supernet_file  # its weights are in the models (the head's are kept for the export only)
        head = head if self.export else None
        table, size = self._latency(scorer, given)
        start = start_arch(settings.stage, supernet.search_space, state, self.step1_arch, settings.order, table)
        outcome = run_stage(settings, scorer, start, state, self.state_path, record, table, size,
                            out_dir=self.work_dir, writer=is_main_process(),
                            search_space=supernet.search_space if settings.stage == 1 else None)
        self.scored = scorer.scored
        if is_main_process():
            plot_stage(outcome, settings, self.work_dir)
            if self.export:
                self._export(supernet, outcome.result.best_arch, outcome.summary, head)
        return outcome.summary

    def _options(self, given: Optional[Tuple[Dict[str, float], Optional[list]]]) -> Dict[str, Any]:
        """The flags that decide which archs a rank scores and how (``'option.<name>'``), for the ranks to compare:
        every rank must walk the same archs."""
        options = dict(dataclasses.asdict(self.settings), step1_arch=self.step1_arch, resume=self.resume,
                       latency_table=given, latency_size=self.latency_size, export=self.export,
                       device=str(self.device))
        return {f'option.{k}': v for k, v in options.items()}

    def _scorer(self, supernet, teacher, objective: dict, head: Optional[Checkpoint]) -> DownstreamScorer:
        """The runner's downstream model (its heads from ``head``, the head checkpoint) around each scored arch."""
        cfg = self.runner.cfg
        model = self.runner.model.module if is_model_wrapper(self.runner.model) else self.runner.model
        name = Path(cfg.filename).name if cfg.filename else 'the config'
        model = prepare_downstream_model(model, teacher, self.settings.metric, head, name)
        return DownstreamScorer(model, self.dataloader, self.evaluator, supernet, teacher, self.settings.metric,
                          device=self.device, distill_objective=objective,
                          scope=cfg.get('default_scope') or 'mmseg')

    def _latency(self, scorer: DownstreamScorer,
                 given: Optional[Tuple[Dict[str, float], Optional[list]]]) -> Tuple[Dict[str, float], tuple]:
        """The latency table and its input size: the given table, else measured by rank 0 (cached in the work dir)
        and sent to every process, so that every rank costs archs alike."""
        if given is not None:
            table, size = given
            return table, tuple(self.latency_size or size or ())
        size = tuple(self.latency_size or scorer.input_size())
        table = on_main_process(lambda: load_or_measure(self.work_dir / 'latency_table.json', scorer.supernet,
                                                        size, self.device))
        return table, size

    def _export(self, supernet, best: str, summary: Dict[str, Any], head: Optional[Checkpoint]) -> None:
        """The best arch as a hybrid checkpoint (with the head, and the fine-tuning config with ``distill_config``);
        the config in its meta evaluates with mmengine's own ValLoop, not this search."""
        cfg = copy.deepcopy(self.runner.cfg)
        cfg.val_cfg = dict(type='ValLoop')
        paths = export_hybrid(supernet, best, self.work_dir, head, self.distill_config,
                              downstream_cfg=cfg)
        summary['export'] = {k: str(v) for k, v in paths.items()}
        write_json_atomic(self.work_dir / 'search.json', summary)
        for kind, path in paths.items():
            print(f'exported {kind}: {path}')
