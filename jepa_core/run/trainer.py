"""The training loop: data, masks, schedules, the step, diagnostics, rules, evaluation, checkpoints.

Read top to bottom: `Trainer.__init__` sets everything up (every error is raised before the run directory exists),
`Trainer.run` loops `Trainer.step_once`. The headless entry point is `jepa_core.train` (`jepa train`, `torchrun -m
jepa_core.train`). Schedules and batches are pure functions of the step, so resume needs no replay. Batches come
from `jepa_core.data` (DataLoader workers decode, crop and mask them ahead of the step); this process only moves
them to the device. Faults (design §8) enter only through `jepa_core.method.faults`.

Longer than the ~350-line guide, on purpose: every method here reads and changes one run's state (model, optimizer,
stream, rules, lock, step), and each is short; split into modules, that state would be passed around instead.
"""

from __future__ import annotations

import contextlib
import copy
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import torch

from jepa_core.alerts.base import Alert
from jepa_core.alerts.clock import RunClock
from jepa_core.alerts.engine import RuleEngine
from jepa_core.alerts.windows import rewind_reserve, rewind_step_before, rule_window_steps
from jepa_core.common.atomic import remove_stale_temp_files
from jepa_core.common.console import format_console_line, terminal_safe
from jepa_core.config import CADENCE_KEYS, Config, DiagnosticsConfig, config_to_dict
from jepa_core.data import ImageDataset, datasets_for, train_feed_for
from jepa_core.method.ema import ema_momentum
from jepa_core.method.faults import faulty_settings
from jepa_core.method.masks import MaskBatch
from jepa_core.method.model import build_jepa
from jepa_core.method.runtime import StepProfiler, autocast_for, compile_module, resolve_device
from jepa_core.method.schedules import LrSchedule, cosine_schedule
from jepa_core.method.step import OnlineNetwork, StepSettings, TrainState, build_optimizer, train_step
from jepa_core.metrics.instrument import Instrumentation
from jepa_core.metrics.sinks import (
    JsonlSink,
    MetricLogger,
    TensorBoardSink,
    TrackioSink,
    WandbSink,
)
from jepa_core.metrics.stream import iter_rows
from jepa_core.run import distributed
from jepa_core.run import status as run_status
from jepa_core.run.checkpoint import (
    clean_checkpoint_dir,
    find_resume_checkpoint,
    list_checkpoints,
    load_initial_weights,
    prune_checkpoints,
    save_checkpoint,
    save_initial_weights,
)
from jepa_core.run.control import (
    ControlError,
    ControlWatcher,
    read_control,
    write_control,
)
from jepa_core.run.evaluation import run_evaluation
from jepa_core.run.lock import RunLock
from jepa_core.run.rundir import (RunPaths, create_run, next_attempt, record_kept_checkpoints,
                                  refuse_planted_links, refuse_taken_run, refuse_unwritable, set_status, start_meta)
from jepa_core.run.signals import GracefulStop
from jepa_core.run.step_hooks import TrainerHooks
from jepa_core.run.validation import validate_config

MetricsCallback = Callable[[int, dict], None]
CONTROL_SYNC_EVERY = 10  # under DDP, rank 0 shares control-file changes and stop decisions this often


class Trainer:
    def __init__(self, cfg: Config, run_dir: str | Path | None = None, resume: bool = False,
                 quiet: bool = False, progress: bool | None = None, profile_steps: tuple[int, int] | None = None):
        self._created = time.time()  # control-file requests older than this were meant for an earlier attempt
        # The trainer's own copy: resuming, a run_dir or a live cadence change edit it, never the caller's config.
        self.cfg = cfg = copy.deepcopy(validate_config(cfg))
        self.quiet = quiet
        self.dist = distributed.context()
        self.device = resolve_device(cfg.runtime.device, self.dist.local_rank)
        if self.dist.is_main:  # a read-only disk or a path through a file: refused before any work, naming it
            if resume:
                refuse_unwritable(Path(run_dir), "run directory")
            else:
                refuse_unwritable(Path(run_dir).parent if run_dir else Path(cfg.logging.runs_dir), "logging.runs_dir")
        if not resume and self.dist.is_main and (run_dir or cfg.logging.name):
            # create_run checks again when it creates the directory; this only refuses early, before any work
            refuse_taken_run(Path(run_dir).parent if run_dir else Path(cfg.logging.runs_dir),
                             Path(run_dir).name if run_dir else cfg.logging.name)
        self.train_set, self.heldout = datasets_for(cfg)  # folder / npz: listed or mapped, no pixels read yet
        # This rank's batches, read by cfg.data.num_workers processes once the first one is asked for.
        self.feed = train_feed_for(cfg, self.train_set, self.dist.rank, self.dist.world_size,
                                   pin_memory=self.device.type == "cuda")

        self.model = build_jepa(cfg.model, cfg.runtime.seed).to(self.device)
        extra = []
        if cfg.faults.target_gradients:
            # In the optimizer from the start (resume-safe state layout); they require a grad only once the fault
            # begins (train_step switches requires_grad on at faults.start_step), so the run is healthy before it.
            extra = list(self.model.target_encoder.parameters())
        self.optimizer = build_optimizer(self.model, (cfg.optim.beta1, cfg.optim.beta2), extra)
        self.online = distributed.wrap(OnlineNetwork(self.model), self.dist, self.device)
        # What the step calls: compiled wrappers that share the parameters of self.model (checkpoints, diagnostics
        # and evaluation keep using the plain modules, so evaluation's batch shapes never trigger a recompile).
        self.step_online, self.step_target = self.online, self.model.target_encoder
        if cfg.runtime.compile:
            self.step_online, self.step_target = compile_module(self.online), compile_module(self.model.target_encoder)
        self.state = TrainState(self.model, self.optimizer, self.step_online, self.step_target,
                                global_batch_size=cfg.optim.batch_size, autocast=self.autocast)
        self.instrumentation = Instrumentation(self.model, cfg.diagnostics, cfg.optim.steps, self.device,
                                               self.dist.world_size)
        # Everything the step's loop adds around the method: timing, gradient reads, faults, trace, mask overlay.
        self.hooks = TrainerHooks(cfg, self.state, self.instrumentation, self.device, self.dist.enabled,
                                  train_size=len(self.train_set),
                                  streamed=not isinstance(self.train_set, ImageDataset),
                                  say=self._say_on_stderr if self.dist.is_main else None)
        # One lr schedule: the one the steps train with is the one the rules judge distances against.
        self.lr_schedule = LrSchedule.of(cfg.optim)
        labelled = int((self.heldout.labels >= 0).sum())
        self.rules = RuleEngine(cfg.rules, feature_dim=cfg.model.embed_dim, lr_schedule=self.lr_schedule,
                                eval_count=labelled - labelled // 2 or None,  # the probe-val half
                                clock=RunClock.of(cfg))
        self.step = 0
        self.critical_alert = False  # acted on by every rank
        self.diverged = False  # the last update was refused: its loss or gradient was non-finite
        self._failed_groups: set[str] = set()  # diagnostic groups that raised at least once (printed once each)
        self._critical_pending = False  # rank 0's rules fired a critical alert; applied at the next control sync
        self.stop_requested = False  # set by the control file ("stop": true) or a stop signal
        self._stop_event: threading.Event | GracefulStop | None = None  # run()'s stop_event, read at control sync
        self.on_metrics: MetricsCallback | None = None
        self.phase = "ready"  # what the trainer is doing now, in words, for the workbench's progress line

        # Everything that can fail on bad input has run: only now touch the disk.
        self.lock: RunLock | None = None  # rank 0 holds the run directory for the life of this trainer
        try:
            self.paths = self._open_run_dir(run_dir, resume)
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise
        self.logger = self._build_logger()
        if profile_steps is not None and self.dist.is_main:
            self.hooks.profiler = StepProfiler(*profile_steps, self.paths.root / "traces", self.device)
        if self.dist.is_main and self._stale_stop_request():
            write_control(self.paths.root, stop=False)  # a stop asked of an earlier attempt must not end this one
        self.control = ControlWatcher(self.paths.root) if self.dist.is_main else None
        show = cfg.logging.progress_bar if progress is None else progress
        self._progress = None
        if show and self.dist.is_main and not quiet:
            from tqdm.auto import tqdm

            self._progress = tqdm(total=cfg.optim.steps, initial=self.step, unit="step", dynamic_ncols=True)

    # ----------------------------------------------------------------------------------------------------- setup
    def _open_run_dir(self, run_dir: str | Path | None, resume: bool) -> RunPaths:
        if resume:
            paths = RunPaths(Path(run_dir))
            if self.dist.is_main:
                refuse_planted_links(paths)  # before anything is written: the stream must not lead outside the run
                self.lock = RunLock(paths.root).acquire()  # before reading anything another writer could change
                clean_checkpoint_dir(paths.checkpoints)
                remove_stale_temp_files(paths.root)
            found = find_resume_checkpoint(paths.checkpoints, self.device)
            if self.dist.is_main:
                for line in (found.describe() or f"no checkpoint in {paths.checkpoints}").splitlines():
                    self._say_on_stderr(line)  # one line each: terminal_safe would print a newline as "\\n"
            if found.state is not None:
                self._load_state(found.state, paths)
            elif self.dist.is_main:
                # Killed before its first checkpoint: start again from step 0 (same seed, same initial weights);
                # the new attempt's step-0 rows supersede everything the lost attempt wrote.
                self._say_on_stderr("no intact checkpoint: resuming from step 0")
        elif self.dist.is_main:
            name = Path(run_dir).name if run_dir else None
            if run_dir:
                self.cfg.logging.runs_dir = str(Path(run_dir).parent)
            paths, self.lock = create_run(self.cfg, name)
        else:
            paths = RunPaths(Path(run_dir or self.cfg.logging.runs_dir))
        paths = distributed.broadcast_path(paths, self.dist)
        if self.dist.is_main:
            self.meta = start_meta(paths, self.cfg, self.device, self.dist.world_size, next_attempt(paths.metrics))
            if not (paths.checkpoints / "init.pt").is_file():  # atomic, with its digest: a kill mid-write is harmless
                save_initial_weights(paths.checkpoints, self.model.context_encoder.state_dict())
        else:
            self.meta = {}
        # step -> why: the checkpoints kept past logging.keep_checkpoints to rewind to (one per alert, see _keep_for)
        self.kept_checkpoints: dict[int, str] = {int(k["step"]): str(k.get("why", ""))
                                                 for k in self.meta.get("kept_checkpoints", [])
                                                 if isinstance(k, dict) and isinstance(k.get("step"), int)}
        return paths

    def _say_on_stderr(self, text: str) -> None:
        """Facts the user must see even with --quiet (which checkpoint a resume used, and why)."""
        print(terminal_safe(text), file=sys.stderr, flush=True)

    def _load_state(self, state: dict, paths: RunPaths) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:  # a rewind may change them; the saved groups carry the old ones
            group["betas"] = (self.cfg.optim.beta1, self.cfg.optim.beta2)
        self.instrumentation.load_state_dict(state.get("instrumentation", {}))
        self.hooks.skipped_images = int(state.get("data", {}).get("skipped_images", 0))
        initial, why = load_initial_weights(paths.checkpoints)
        if initial is None:  # only the drift diagnostic needs it: say so, and measure drift from here on
            if self.dist.is_main:
                self._say_on_stderr(f"warning: {why}: health/weight_drift_max is measured from the resumed weights")
            initial = {k: v.detach().cpu().clone() for k, v in self.model.context_encoder.state_dict().items()}
        self.instrumentation.set_initial_weights(initial)
        self.step = int(state["step"])
        # Rules are streaming state machines: replaying the kept rows restores them exactly, nothing to store.
        for row in iter_rows(paths.metrics):
            if row.get("step", 0) <= self.step and "event" not in row:
                self.rules.update(row)

    def _stale_stop_request(self) -> bool:
        """A stop flag written before this trainer began (to an earlier attempt). One written since, e.g. while
        this trainer built its data, is a real request and stays."""
        try:
            asked = bool(read_control(self.paths.root).get("stop"))
            return asked and (self.paths.root / "control.json").stat().st_mtime < self._created
        except (ControlError, FileNotFoundError):
            return False  # a hand-edited bad file: the watcher warns about it and keeps the config's values

    def _build_logger(self) -> MetricLogger:
        lg = self.cfg.logging
        sinks = []
        if self.dist.is_main:
            attempt = int(self.meta.get("attempt", 1))
            if lg.jsonl:
                sinks.append(JsonlSink(self.paths.metrics, attempt=attempt))
            if lg.tensorboard:
                # A resumed attempt rewrites the steps after its checkpoint (from step 0 when it had none).
                purge = (self.step + 1 if self.step else 0) if attempt > 1 else None
                sinks.append(TensorBoardSink(self.paths.tensorboard, purge_step=purge))
            if lg.wandb:
                sinks.append(WandbSink(project="jepa-workbench", name=self.paths.root.name,
                                       config=config_to_dict(self.cfg)))
            if lg.trackio:
                sinks.append(TrackioSink(project="jepa-workbench", name=self.paths.root.name,
                                         config=config_to_dict(self.cfg)))
        return MetricLogger(sinks, rank=self.dist.rank)

    # ------------------------------------------------------------------------------------------------ schedules
    def settings(self, step: int) -> StepSettings:
        """Everything the step needs, as a pure function of the step index (0-based: the update being made)."""
        o, total = self.cfg.optim, self.cfg.optim.steps
        healthy = StepSettings(
            step=step + 1, lr=self.lr_schedule.at(step),
            wd=cosine_schedule(step, total, o.weight_decay, o.final_weight_decay),
            ema_tau=ema_momentum(step, total, self.cfg.ema.start, self.cfg.ema.end, self.cfg.ema.schedule),
            loss=o.loss, grad_clip=o.grad_clip)
        return faulty_settings(self.cfg.faults, step, healthy)

    @property
    def last_batch(self) -> tuple[torch.Tensor, MaskBatch] | None:
        """(uint8 images, masks) of the last batch trained on: the notebook's mask overlay."""
        return self.hooks.last_batch

    def batch(self, step: int) -> tuple[torch.Tensor, MaskBatch]:
        """This rank's (uint8 images, masks) of `step`: a pure function of (seed, step, rank), fault included."""
        batch = self.feed.get(step)
        self.hooks.last_batch = (batch.images, batch.masks)
        return batch.images, batch.masks

    # ---------------------------------------------------------------------------------------------------- steps
    def autocast(self) -> contextlib.AbstractContextManager:
        return autocast_for(self.device, self.cfg.runtime.precision)

    def step_once(self) -> dict[str, float]:
        """One update and everything due at it; returns the metrics logged for it."""
        step = self.step + 1  # the update being made; self.step counts the updates done
        hooks = self.hooks.begin(step)  # what is due at it: timing, gradient reads, noise scale, faults, trace
        images, masks = hooks.fetch(self.feed)
        with hooks.region("train_step"):
            out = train_step(images, masks, self.state, self.settings(step - 1), hooks)
        metrics = hooks.measure(out)  # the diagnostics due, every group at a refused update
        # A refused update (non-finite loss or gradient) is logged at its step with every diagnostic, so the stream
        # shows the failure; the trainer stays at the last finite state, which the final checkpoint keeps.
        self.diverged = not out.finite
        self._report_diagnostic_failures()
        self._emit(step, metrics)
        hooks.end()
        if self.diverged:
            self._print(f"step {step}: non-finite loss or gradient norm; update refused, stopping at the last "
                        f"finite state (step {step - 1})")
            return metrics
        self.step = step
        self._after_step()
        return metrics

    def _report_diagnostic_failures(self) -> None:
        """A diagnostic that raised is an event row (and one console line per group), never the end of the run."""
        for step, group, reason in self.instrumentation.failures:
            self.logger.log(step, {}, event="diagnostic_error", group=group, message=reason)
            if group not in self._failed_groups:
                self._failed_groups.add(group)
                self._print(f"step {step}: diagnostic group {group!r} failed and was skipped ({reason})")

    def _after_step(self) -> None:
        cfg, step = self.cfg, self.step
        if self._progress is not None:
            self._progress.update(1)
        if step % cfg.diagnostics.eval_every_steps == 0 or step == cfg.optim.steps:
            self.evaluate()
        if step % cfg.logging.checkpoint_every_steps == 0 or step == cfg.optim.steps:
            self.save()
        self._poll_control()

    def _emit(self, step: int, metrics: dict[str, float], reduce: bool = True) -> None:
        """One row into the stream, through the rules, to the console and to any in-process listener."""
        if not metrics:
            return
        if reduce:  # every rank reaches this point at the same steps with the same keys
            metrics = distributed.reduce_metrics(metrics, self.dist)
        self.logger.log(step, metrics)
        for alert in self.rules.update({"step": step, **metrics}):
            self.logger.alert(alert.step, alert.rule, alert.severity, alert.metric, alert.value, alert.message)
            self._print(f"[{alert.severity}] step {alert.step} {alert.rule}: {alert.message}")
            if self.dist.is_main:
                self._keep_for(alert)
            if alert.severity == "critical" and self.dist.is_main:
                # Under DDP rank 0 alone decides (ranks see different batches); the others learn it at the next sync.
                self._critical_pending = True
        if self._progress is not None and step % self.cfg.logging.log_every_steps == 0:
            self._progress.set_postfix_str(format_console_line(step, self.cfg.optim.steps, metrics), refresh=False)
        elif self._progress is None and not self.quiet and step % self.cfg.logging.log_every_steps == 0:
            self._print(format_console_line(step, self.cfg.optim.steps, metrics))
        if self.on_metrics is not None:
            self.on_metrics(step, metrics)

    def _keep_for(self, alert: Alert) -> None:
        """Keep the checkpoint `jepa rewind --alert` would branch from (the newest one at least the rule's window
        before the alert) whatever logging.keep_checkpoints says, and list it in meta.json with the reason."""
        window = rule_window_steps(alert.rule, self.cfg.rules, self.cfg.diagnostics, alert.metric)
        step = rewind_step_before(alert.step, window, [s for s, _ in list_checkpoints(self.paths.checkpoints)])
        if step is None or step in self.kept_checkpoints:
            return
        self.kept_checkpoints[step] = f"the checkpoint before the {alert.rule} {alert.severity} at step {alert.step}"
        record_kept_checkpoints(self.paths, self.kept_checkpoints)

    def _rewind_reserve(self) -> frozenset[int]:
        """The checkpoints an alert in the coming steps may need to rewind to: every one from the newest checkpoint at
        least the longest rule window back. An alert then pins its own (`_keep_for`); the rest are pruned later."""
        steps = [s for s, _ in list_checkpoints(self.paths.checkpoints)]
        return rewind_reserve(self.step, steps, self.cfg.rules, self.cfg.diagnostics)

    def _print(self, text: str) -> None:
        if not self.dist.is_main or self.quiet:
            return
        text = terminal_safe(text)  # alert messages and metric names come from config and rules: no escapes
        if self._progress is not None:
            self._progress.write(text)
        else:
            print(text, flush=True)

    def _poll_control(self) -> None:
        """Apply control-file changes (cadences, stop), stop signals and pending critical alerts, the same on every
        rank: under DDP every CONTROL_SYNC_EVERY steps, so that all ranks stop at the same step."""
        signalled = self._stop_event is not None and self._stop_event.is_set()
        if self.dist.enabled:
            if self.step % CONTROL_SYNC_EVERY:
                return
            decided = (self.control.poll() if self.control is not None else None, self._critical_pending)
            changes, critical = distributed.broadcast_object(decided, self.dist)
            signalled = distributed.any_rank(signalled, self.dist)  # torchrun signals each rank on its own
        else:
            changes, critical = (self.control.poll() if self.control is not None else None), self._critical_pending
        self.critical_alert = self.critical_alert or critical
        self.stop_requested = self.stop_requested or signalled
        if not changes:
            return
        cadences = {k: v for k, v in changes.items()
                    if k in CADENCE_KEYS and getattr(self.cfg.diagnostics, k) != v}
        if cadences:
            for key, value in cadences.items():
                setattr(self.cfg.diagnostics, key, value)
            self.set_cadences(self.cfg.diagnostics)
            self.logger.log(self.step, {}, event="cadence", **cadences)
        if changes.get("stop"):
            self.stop_requested = True

    def set_cadences(self, cadences: DiagnosticsConfig) -> None:
        self.cfg.diagnostics = cadences
        self.instrumentation.set_cadences(cadences)

    def evaluate(self) -> dict[str, float]:
        if not self.dist.is_main:
            return {}
        self.phase = f"evaluating step {self.step}"
        images, masks = self.last_batch if self.last_batch is not None else (None, None)
        result = run_evaluation(self.model, self.heldout, self.cfg, self.device, self.step,
                                self.paths.artifacts if self.cfg.eval.artifacts else None, images, masks,
                                on_skipped=self._say_on_stderr)
        self.phase = "training"
        self._emit(self.step, result, reduce=False)  # rank 0 alone evaluates
        return result

    def save(self) -> None:
        if not self.dist.is_main:
            return
        self.logger.fsync()  # the stream on disk must cover every step the checkpoint claims
        state = {"step": self.step, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "instrumentation": self.instrumentation.state_dict(), "config": config_to_dict(self.cfg),
                 "data": {"skipped_images": self.hooks.skipped_images}}
        save_checkpoint(self.paths.checkpoints, self.step, state)
        prune_checkpoints(self.paths.checkpoints, keep_last=self.cfg.logging.keep_checkpoints,
                          keep_steps=frozenset(self.kept_checkpoints) | self._rewind_reserve())

    # ----------------------------------------------------------------------------------------------------- loop
    def run(self, stop_event: threading.Event | None = None, on_metrics: MetricsCallback | None = None,
            max_steps: int | None = None) -> str:
        """Train until the configured step count, a stop request, or `max_steps` more steps. Returns the status."""
        self.on_metrics = on_metrics
        self._stop_event = stop_event
        status = run_status.RUNNING
        try:
            if self.dist.is_main:
                set_status(self.paths, run_status.RUNNING, self.step)  # a paused trainer that goes on
            if self.step == 0:
                self._emit(0, self.instrumentation.start_metrics())
                if self.cfg.eval.at_start:
                    self.evaluate()
            self._poll_control()  # a stop asked for while data was built (or step 0 evaluated)
            end = self.cfg.optim.steps if max_steps is None else min(self.cfg.optim.steps, self.step + max_steps)
            self.phase = "training"
            while status == run_status.RUNNING:
                status = self._stop_status()
                if status == run_status.RUNNING and self.step < end:
                    self.step_once()
                    status = self._stop_status()
                if status == run_status.RUNNING and self.step >= end:
                    status = run_status.FINISHED if self.step >= self.cfg.optim.steps else run_status.PAUSED
        except BaseException:
            self._settle(run_status.CRASHED)
            raise
        if status in (run_status.STOPPED, run_status.STOPPED_ON_ALERT, run_status.DIVERGED):
            return self.end(status)
        self._settle(status, close=status != run_status.PAUSED)  # finished: its last step already saved
        return status

    def end(self, status: str = run_status.STOPPED) -> str:
        """End the run with a final checkpoint, the status in meta.json, every sink closed and the run directory
        given back: how `run` ends a stop, and how the workbench ends a paused trainer. A failed final
        checkpoint records `crashed` and raises."""
        try:
            self.save()
        except BaseException:
            self._settle(run_status.CRASHED)
            raise
        self._settle(status)
        return status

    def _settle(self, status: str, close: bool = True) -> None:
        self.phase = status
        try:
            if self.dist.is_main:
                set_status(self.paths, status, self.last_step)
        finally:
            if close:
                self.close()

    @property
    def last_step(self) -> int:
        """The run's last step: the one whose update was refused for a diverged run, else the trainer's step."""
        return self.step + 1 if self.diverged else self.step

    def _stop_status(self) -> str:
        """Why the loop must end now (one of the status words), or "running"."""
        if self.diverged:
            return run_status.DIVERGED
        if self.critical_alert and self.cfg.rules.stop_on_critical:
            self._print(f"stopping at step {self.step}: critical alert and rules.stop_on_critical")
            return run_status.STOPPED_ON_ALERT
        if self.stop_requested:
            why = getattr(self._stop_event, "signal_name", None) if self._stop_event is not None else None
            self._print(f"stopping at step {self.step}" + (f" on {why}" if why else "") + ": final checkpoint")
            return run_status.STOPPED
        return run_status.RUNNING

    def close(self) -> None:
        """Stop the data workers and any trace, close every sink, then give the run directory back (the lock is
        the last thing this trainer holds)."""
        self.feed.close()
        if self.hooks.profiler is not None:
            self.hooks.profiler.close(self.last_step)
        if self._progress is not None:
            self._progress.close()
            self._progress = None
        try:
            self.logger.close()
        finally:
            if self.lock is not None:
                self.lock.release()
                self.lock = None
