"""`TrainingSession`: what the train notebook's buttons do, as a plain object that tests drive without a browser.

One session shows one run at a time. Its jobs run on threads made by `thread_factory` (`mo.Thread` in the
notebook, so that `on_change` may set marimo state; `threading.Thread` in tests):
- in-process: a `Trainer` runs on a job thread; a watcher thread follows its metrics.jsonl and its phase;
- detached: a `jepa train` process trains; a job thread follows its run directory (only new bytes are read).
Every action replaces the one message the workbench shows; the end of a run replaces it with how it ended.
Status words are jepa_core.run.status's, verbatim; before any run the session is "idle".
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from jepa_core.config import ConfigError
from jepa_core.data import DataError
from jepa_core.method.runtime import set_thread_count
from jepa_core.run import status as words
from jepa_core.run.checkpoint import CheckpointError
from jepa_core.run.control import write_control
from jepa_core.run.lock import RunLockedError
from jepa_core.run.rundir import default_run_name
from jepa_core.workbench.detached import DetachedRun, launch_detached, stop_detached
from jepa_core.workbench.live import LiveRun, LiveTable
from jepa_core.workbench.panel import latest_mask_artifact, mask_overlay_png
from jepa_core.workbench.plan import Plan
from jepa_core.workbench.runs import (
    DEFAULT_ROOTS,
    RunInfo,
    discover_runs,
    read_config_file,
    run_info,
)
from jepa_core.workbench.view import (
    BUILDING,
    DETACHED,
    IDLE,
    IN_PROCESS,
    STARTING,
    TRAINING,
    Publisher,
    SessionView,
    Watcher,
    eta_of,
    trainer_phase,
)

log = logging.getLogger(__name__)


class TrainingSession:
    """Start, Step N, Stop, Launch detached, list and reattach, follow, live cadences: one run at a time."""

    def __init__(self, roots: Iterable[str | Path] = DEFAULT_ROOTS,
                 thread_factory: Callable[..., threading.Thread] = threading.Thread,
                 on_change: Callable[[SessionView], None] | None = None,
                 watch: Mapping[str, Watcher] | None = None,
                 publish_every: float = 1.0, poll_every: float = 0.5) -> None:
        """`on_change` gets each new view (throttled); `watch` maps a view field to a callback, or `(callback,
        seconds)`, that gets its value only when it changed ("epoch": the run or its status changed, "rows":
        there is something new to chart), so that what depends on it is not rebuilt every second."""
        self.roots = [Path(r) for r in roots]
        self._spawn = thread_factory
        self._publisher = Publisher(on_change, watch, publish_every)
        self._poll_every = poll_every
        self._lock = threading.RLock()
        self._poll_lock = threading.Lock()  # one reader of the followed stream at a time (the follower keeps offsets)
        self._idle = threading.Event()  # set while no job runs
        self._idle.set()
        self._stop = threading.Event()  # the in-process trainer's stop_event
        self._cancel = threading.Event()  # ends a follow job (the detached run goes on)
        self._trainer: Any = None  # an in-process Trainer, open while running or paused
        self._detached: DetachedRun | None = None
        self._live: LiveRun | None = None
        self._stop_asked = False  # Stop was pressed for the current detached run
        self._stop_signalled = ""  # how it was signalled, when by SIGTERM (sent once)
        self._on_disk = False  # the followed run's meta.json has been seen
        self._slider: dict[str, int] | None = None  # cadence values last seen from the sliders
        self._pending: dict[str, int] = {}  # cadence changes waiting for the run directory to exist
        self._plan_at_start = True  # eval.at_start of the current run (its step-0 phase)
        self._status, self._phase, self._message = IDLE, "", "No run yet: press Start, Step N or Launch detached."
        self._step, self._total, self._mode, self._run_dir = 0, 0, None, None
        self._epoch = 0

    # ------------------------------------------------------------------------------------------------ reading
    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    @property
    def table(self) -> LiveTable | None:
        live = self._live
        return None if live is None else live.table

    def view(self) -> SessionView:
        with self._lock:
            trainer, table = self._trainer, self.table
            step, phase, total = self._step, self._phase, self._total
            if trainer is not None and self.busy and self._status == words.RUNNING:
                step, total = int(trainer.step), int(trainer.cfg.optim.steps)
                phase = trainer_phase(str(trainer.phase), step, phase)
            return SessionView(status=self._status, phase=phase, message=self._message, step=step, total=total,
                               eta_seconds=eta_of(table) if phase == TRAINING else None, mode=self._mode,
                               run_dir=self._run_dir, busy=self.busy,
                               rows=0 if table is None else len(table.scalars) + len(table.alerts),
                               epoch=self._epoch, version=self._publisher.version)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the current job ends (tests); True when it did."""
        return self._idle.wait(timeout)

    def running_runs(self) -> list[RunInfo]:
        """Runs a live writer holds now, listed afresh on each call (a run launched a moment ago included)."""
        roots = list(dict.fromkeys([*self.roots, *([self._run_dir.parent] if self._run_dir else [])]))
        return [r for r in discover_runs(roots) if r.status in words.LIVE]

    def mask_overlay(self, count: int = 4) -> bytes | None:
        """PNG of the current batch's masks over its images (one step's pair), else the run's newest mask PNG."""
        trainer = self._trainer
        batch = getattr(trainer, "last_batch", None)  # read once: images and masks of the same step
        if batch is not None:
            return mask_overlay_png(batch, int(trainer.cfg.model.patch_size), count)
        return latest_mask_artifact(self._run_dir)

    # ------------------------------------------------------------------------------------------------ actions
    def start(self, plan: Plan | None) -> str:
        """Train in this process to the end (a paused run goes on from where it is)."""
        return self._train(plan, None)

    def step(self, plan: Plan | None, n: int) -> str:
        """Train n more steps and pause (a new run when none is paused)."""
        return self._train(plan, max(1, int(n)))

    def stop(self) -> str:
        with self._lock:
            if self._mode == IN_PROCESS and self.busy:
                self._stop.set()
                self._say("Stop requested: the run stops after its current step and writes a checkpoint.")
            elif self._mode == IN_PROCESS and self._trainer is not None:
                self._say("Stopping the paused run: writing its final checkpoint.")
                self._begin(self._end_paused, words.STOPPED)
            elif self._mode == DETACHED and self.busy:
                self._stop_asked = True
                how = self._stop_detached()
                self._say(f"Stop requested ({how}): the detached run stops after its current step.")
            else:
                self._say("Nothing to stop.")
        return self._published_message()

    def launch_detached(self, plan: Plan | None) -> str:
        """Start a `jepa train` process for the plan and follow it."""
        with self._lock:
            self._launch(plan)
        return self._published_message()

    def reattach(self, path: str | Path) -> str:
        """Follow a run another process (or an earlier kernel) is writing."""
        with self._lock:
            self._reattach(Path(path))
        return self._published_message()

    def set_cadences(self, values: Mapping[str, Any]) -> str | None:
        """Slider values in; the ones that moved since last seen go to the open run's control.json (read by the
        trainer before its next step). The first call only records the sliders' positions."""
        values = {k: int(v) for k, v in values.items()}
        with self._lock:
            seen, self._slider = self._slider, values
            moved = {k: v for k, v in values.items() if seen is not None and seen.get(k) != v}
            if not moved or not (self.busy or self._trainer is not None) or self._run_dir is None:
                return None
            self._pending.update(moved)
            self._flush_cadences()
            self._say("Cadence " + ", ".join(f"{k} = {v}" for k, v in moved.items())
                      + ": applied from the run's next step.")
        return self._published_message()

    def close(self, timeout: float = 120.0) -> None:
        """Stop following, stop an in-process run and end a paused one (a detached process keeps training)."""
        self._cancel.set()
        self._stop.set()
        self.wait(timeout)
        if self._trainer is not None and not self.busy:
            self._end_paused(words.STOPPED)

    # ------------------------------------------------------------------------------------------------ jobs
    def _train(self, plan: Plan | None, max_steps: int | None) -> str:
        with self._lock:
            paused = self._mode == IN_PROCESS and self._trainer is not None
            refusal = None if paused and not self.busy else self._refusal(plan)
            if refusal:
                self._say(refusal)
            else:
                self._end_follow()
                self._stop.clear()
                what = "to the end" if max_steps is None else f"{max_steps} step(s), then pause"
                if paused:
                    self._set(words.RUNNING, TRAINING, f"Continuing {self._run_dir.name}: {what}.")
                else:
                    self._trainer, self._detached = None, None
                    self._plan_at_start = bool(plan.cfg.eval.at_start)
                    self._switch(IN_PROCESS, None, plan.cfg.optim.steps)
                    self._set(words.RUNNING, BUILDING, f"Starting a run in this process: {what}.")
                self._begin(self._run_trainer, plan, max_steps)
                self._begin_watch()
        return self._published_message()

    def _launch(self, plan: Plan | None) -> None:
        refusal = self._refusal(plan)
        if refusal:
            self._say(refusal)
            return
        self._end_follow()
        name = plan.name or default_run_name()
        try:
            launched = launch_detached(plan.cli_overrides(), name, plan.preset, plan.cfg.logging.runs_dir)
        except FileExistsError as exc:
            self._say(str(exc))
            return
        self._detached, self._trainer, self._stop_asked, self._stop_signalled = launched, None, False, ""
        self._plan_at_start = bool(plan.cfg.eval.at_start)
        self._switch(DETACHED, launched.run_dir, plan.cfg.optim.steps)
        self._set(words.RUNNING, BUILDING, f"Launched pid {launched.pid}: {launched.run_dir} "
                                           f"(its console log: {launched.log_path})")
        self._begin(self._follow)

    def _reattach(self, path: Path) -> None:
        if self._mode == IN_PROCESS and (self.busy or self._trainer is not None):
            self._say("An in-process run is open here: Stop it before reattaching.")
            return
        self._end_follow()
        info = run_info(path)
        try:
            config = read_config_file(path / "config.toml")
        except ValueError:
            config = {}
        self._detached, self._stop_asked, self._stop_signalled = None, False, ""
        self._plan_at_start = bool(config.get("eval", {}).get("at_start", True))
        self._switch(DETACHED, path, int(config.get("optim", {}).get("steps", 0) or 0))
        self._set(info.status, "", f"Following {path}")
        self._begin(self._follow)

    def _run_trainer(self, plan: Plan | None, max_steps: int | None) -> None:
        from jepa_core.run.trainer import (
            Trainer,  # torch and the model: only once a run starts
        )

        trainer = self._trainer
        status, message, started = None, None, False
        try:
            if trainer is None:
                cfg = plan.fresh_config()
                cfg.logging.progress_bar = False
                set_thread_count(cfg.runtime.num_threads)  # the notebook's kernel runs the trainer: it asked for it
                trainer = Trainer(cfg, quiet=True, progress=False)
                with self._lock:
                    self._trainer = trainer
                    self._switch(IN_PROCESS, trainer.paths.root, cfg.optim.steps)
                    self._live = LiveRun(trainer.paths.root)
                    self._flush_cadences()
            self._set(words.RUNNING, STARTING if trainer.step == 0 else TRAINING)
            self._publish(force=True)
            started = True
            status = trainer.run(stop_event=self._stop, max_steps=max_steps)
        except (RunLockedError, ConfigError, DataError, CheckpointError, FileExistsError) as exc:
            # Refused before a step (a held run, bad data): nothing ran, unless the trainer had begun
            status, message = (words.CRASHED, f"crashed: {exc}") if started else (None, f"Could not start: {exc}")
        except Exception as exc:  # the trainer recorded "crashed" in meta.json; the workbench says why
            log.exception("in-process training failed")
            why = f"{type(exc).__name__}: {exc}"
            status, message = (words.CRASHED, f"crashed: {why}") if started else (None, f"Could not start: {why}")
        self._finish(trainer, status, message)

    def _end_paused(self, status: str) -> None:
        """End a paused in-process run the way the trainer ends one: final checkpoint, status, lock released."""
        trainer, message = self._trainer, None
        try:
            status = trainer.end(status)
        except (OSError, CheckpointError) as exc:  # e.g. a full disk: the run cannot be said to have stopped cleanly
            log.exception("ending the paused run failed")
            status, message = words.CRASHED, f"crashed while writing the final checkpoint: {exc}"
        self._finish(trainer, status, message)

    def _finish(self, trainer: Any, status: str | None, message: str | None) -> None:
        with self._lock:
            if status is None:  # refused before any step: back to what was shown before
                self._set(IDLE if self._run_dir is None else self._status, "", message or "")
                return
            self._trainer = trainer if status == words.PAUSED else None
            self._step = int(trainer.last_step)
            self._poll_live()
            if message is None:
                message = f"{status} at step {self._step} of {self._total}" + (
                    ": Step N goes on, Start trains to the end, Stop ends the run." if status == words.PAUSED else ".")
            self._set(status, "", message)

    def _watch_in_process(self) -> None:
        """Follow the in-process run's stream and phase until its job ends (the trainer's thread is busy)."""
        while not self._idle.wait(self._poll_every):
            self._poll_live()
            self._publish()
        self._publish(force=True)

    def _follow(self) -> None:
        """Follow a detached run until it ends, its process exits, or the session moves on."""
        while not self._cancel.is_set():
            path = self._run_dir
            if self._live is None and (path / "meta.json").is_file():
                self._live = LiveRun(path)
            self._poll_live()
            info = run_info(path)
            with self._lock:
                ended = self._follow_step(info)
            self._publish()
            if ended:
                break
            self._cancel.wait(self._poll_every)

    def _follow_step(self, info: RunInfo) -> bool:
        """Update progress from the followed run (caller holds the lock); True when following is over."""
        launched = self._detached
        self._step = int(info.steps or 0)
        exited = launched is not None and launched.exited()
        if info.status in words.ENDED:
            self._set(info.status, "", f"{info.status} at step {self._step} of {self._total}.")
            return True
        if exited and info.status not in words.LIVE:  # it never wrote a run directory (or its meta is damaged)
            why = "after Stop" if self._stop_asked else f"with code {launched.returncode}"
            self._set(words.STOPPED if self._stop_asked and info.status == words.UNKNOWN else info.status, "",
                      f"The detached process exited {why} before its run started: {launched.log_tail() or 'no output'}")
            return True
        if launched is None and info.status not in words.LIVE:
            self._set(info.status, "", f"{self._run_dir} is {info.status}: nothing to follow.")
            return True
        if info.status not in words.LIVE:  # launched, still building its data: no meta.json yet
            return False
        if not self._on_disk:  # its writer holds it now: a list of running runs should show it
            self._on_disk = True
            self._epoch += 1
        if self._stop_asked:
            self._stop_detached()
        self._flush_cadences()
        if self._live is None or self._live.table.last_step is None:
            phase = STARTING
        elif self._step > 0:
            phase = TRAINING
        else:
            phase = "evaluating step 0" if self._plan_at_start else STARTING
        self._set(info.status, phase)
        return False

    def _stop_detached(self) -> str:
        """Ask the followed run to stop; a SIGTERM is sent once only (a second one ends a trainer at once)."""
        if not self._stop_signalled:
            how = stop_detached(self._detached, self._run_dir)
            self._stop_signalled = how if how.startswith("SIGTERM") else ""
            return how
        return self._stop_signalled

    # ------------------------------------------------------------------------------------------------ helpers
    def _refusal(self, plan: Plan | None) -> str | None:
        if self._mode == IN_PROCESS and self.busy:
            return "Busy training: Stop first."
        if self._mode == IN_PROCESS and self._trainer is not None:
            return "A paused run is open: Stop it first (Step N and Start continue it)."
        if plan is None:
            return "Fix the config first."
        return None

    def _end_follow(self) -> None:
        """Stop following a detached run (it keeps training); caller holds the lock."""
        if self._mode == DETACHED and self.busy:
            self._cancel.set()
            self._lock.release()
            try:
                self._idle.wait(10)
            finally:
                self._lock.acquire()
        self._cancel.clear()

    def _switch(self, mode: str, run_dir: Path | None, total: int) -> None:
        if run_dir != self._run_dir or mode != self._mode:
            self._live, self._on_disk = None, False
            self._epoch += 1
        self._mode, self._run_dir, self._total = mode, run_dir, int(total)
        if run_dir is None:
            self._step = 0

    def _poll_live(self) -> None:
        live = self._live
        if live is not None:
            with self._poll_lock:
                live.poll()

    def _flush_cadences(self) -> None:
        path = self._run_dir
        if self._pending and path is not None and (path / "meta.json").is_file():
            write_control(path, **self._pending)
            self._pending = {}

    def _begin(self, target: Callable[..., None], *args: Any) -> None:
        self._idle.clear()

        def job() -> None:
            try:
                target(*args)
            finally:
                self._idle.set()
                self._publish(force=True)

        self._spawn(target=job, daemon=True, name=f"jepa-{target.__name__.strip('_')}").start()

    def _begin_watch(self) -> None:
        self._spawn(target=self._watch_in_process, daemon=True, name="jepa-watch").start()

    # State changes never call out (callers may hold the lock); _publish, called without it, hands them on.
    def _say(self, message: str) -> None:
        with self._lock:
            self._message = message

    def _set(self, status: str, phase: str, message: str | None = None) -> None:
        with self._lock:
            if status != self._status:
                self._epoch += 1
            self._status, self._phase = status, phase
            if message is not None:
                self._message = message

    def _published_message(self) -> str:
        self._publish(force=True)
        return self._message

    def _publish(self, force: bool = False) -> None:
        self._publisher.publish(self.view(), force)
