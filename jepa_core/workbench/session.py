"""`TrainingSession`: what the train notebook's buttons do, as a plain object that tests drive without a browser.

One session shows one run at a time (its state: jepa_core.workbench.session_state). Its jobs run on threads made by
`thread_factory` (`mo.Thread` in the notebook, so that `on_change` may set marimo state; `threading.Thread` in tests):
- in-process (here): a `Trainer` runs on a job thread; a watcher thread follows its metrics.jsonl and its phase;
- detached (jepa_core.workbench.following): a `jepa train` process trains; a job thread follows its run directory
  (only new bytes are read).
Every action replaces the one message the workbench shows; the end of a run replaces it with how it ended.
Status words are jepa_core.run.status's, verbatim; before any run the session is "idle".
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from jepa_core.config import ConfigError
from jepa_core.data import DataError
from jepa_core.method.runtime import set_thread_count
from jepa_core.run import status as words
from jepa_core.run.checkpoint import CheckpointError
from jepa_core.run.lock import RunLockedError
from jepa_core.workbench.following import FollowingSession
from jepa_core.workbench.live import LiveRun
from jepa_core.workbench.plan import Plan
from jepa_core.workbench.view import (
    BUILDING,
    DETACHED,
    IDLE,
    IN_PROCESS,
    STARTING,
    TRAINING,
)

log = logging.getLogger(__name__)


class TrainingSession(FollowingSession):
    """Start, Step N, Stop, Launch detached, list and reattach, follow, live cadences: one run at a time."""

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

    def set_cadences(self, values: Mapping[str, Any], origin: str | None = None) -> str | None:
        """Slider values in; the ones that moved since last seen go to the open run's control.json (read by the
        trainer before its next step). The first call only records the sliders' positions, and so does a call with
        another `origin` (sliders rebuilt at another preset's cadences: nobody moved them for the open run)."""
        values = {k: int(v) for k, v in values.items()}
        with self._lock:
            rebuilt, self._slider_origin = origin != self._slider_origin, origin
            seen, self._slider = (None if rebuilt else self._slider), values
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

    def _begin_watch(self) -> None:
        self._spawn(target=self._watch_in_process, daemon=True, name="jepa-watch").start()
