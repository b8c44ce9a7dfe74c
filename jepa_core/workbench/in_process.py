"""`InProcessRuns`: what a training session does with a run this process trains (Start, Step N, Stop, pause).

A `Trainer` runs on the session's job thread; a watcher thread follows its metrics.jsonl and its phase meanwhile
(the trainer's thread is busy training). Step N leaves the trainer open and paused, so that Step N and Start go on
with it; Stop ends it as the trainer ends a run (final checkpoint, status, lock released).

`InProcessRuns` keeps no state of its own: it is handed the session's `SessionState` (jepa_core.workbench
.session_state) and changes it, as `DetachedRuns` (jepa_core.workbench.following) does for runs another process
trains. Its actions expect the caller (`TrainingSession`) to hold `state.lock` and to publish the message afterwards.
"""

from __future__ import annotations

import logging
from typing import Any

from jepa_core.config import ConfigError
from jepa_core.data import DataError
from jepa_core.method.runtime import set_thread_count
from jepa_core.run import status as words
from jepa_core.run.checkpoint import CheckpointError
from jepa_core.run.lock import RunLockedError
from jepa_core.workbench.live import LiveRun
from jepa_core.workbench.plan import Plan
from jepa_core.workbench.session_state import SessionState
from jepa_core.workbench.view import BUILDING, IDLE, IN_PROCESS, STARTING, TRAINING

log = logging.getLogger(__name__)


class InProcessRuns:
    """Train in this process on a job thread: to the end, or n steps and pause; stop it, or end a paused one."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    @property
    def open(self) -> bool:
        """An in-process run is shown and training or paused (its trainer is here)."""
        state = self.state
        return state.mode == IN_PROCESS and (state.busy or state.trainer is not None)

    # ------------------------------------------------------------------------------------------------ actions
    # Each is called with state.lock held; the caller publishes the message afterwards.
    def train(self, plan: Plan | None, max_steps: int | None) -> None:
        """Train to the end (`max_steps` None) or n more steps, going on with a paused run when one is open."""
        state = self.state
        paused = state.mode == IN_PROCESS and state.trainer is not None
        refusal = None if paused and not state.busy else state.refusal(plan)
        if refusal:
            state.say(refusal)
            return
        state.end_follow()
        state.stop_event.clear()
        what = "to the end" if max_steps is None else f"{max_steps} step(s), then pause"
        if paused:
            state.set_status(words.RUNNING, TRAINING, f"Continuing {state.run_dir.name}: {what}.")
        else:
            state.trainer, state.launched = None, None
            state.plan_at_start = bool(plan.cfg.eval.at_start)
            state.switch(IN_PROCESS, None, plan.cfg.optim.steps)
            state.set_status(words.RUNNING, BUILDING, f"Starting a run in this process: {what}.")
        state.begin(self.run_trainer, plan, max_steps)
        state.spawn(target=self.watch, daemon=True, name="jepa-watch").start()

    def stop(self) -> None:
        """Stop the open run: a training one after its current step, a paused one at once (on a job thread)."""
        state = self.state
        if state.busy:
            state.stop_event.set()
            state.say("Stop requested: the run stops after its current step and writes a checkpoint.")
        else:
            state.say("Stopping the paused run: writing its final checkpoint.")
            state.begin(self.end_paused, words.STOPPED)

    def close(self) -> None:
        """End a paused run as Stop does, on the caller's thread (the session is closing; no job runs)."""
        if self.state.trainer is not None and not self.state.busy:
            self.end_paused(words.STOPPED)

    # ------------------------------------------------------------------------------------------------ jobs
    def run_trainer(self, plan: Plan | None, max_steps: int | None) -> None:
        """The job's body: build the trainer (a new run) or take the paused one, and train."""
        from jepa_core.run.trainer import (
            Trainer,  # torch and the model: only once a run starts
        )

        state = self.state
        trainer = state.trainer
        status, message, started = None, None, False
        try:
            if trainer is None:
                cfg = plan.fresh_config()
                cfg.logging.progress_bar = False
                set_thread_count(cfg.runtime.num_threads)  # the notebook's kernel runs the trainer: it asked for it
                trainer = Trainer(cfg, quiet=True, progress=False)
                with state.lock:
                    state.trainer = trainer
                    state.switch(IN_PROCESS, trainer.paths.root, cfg.optim.steps)
                    state.live = LiveRun(trainer.paths.root)
                    state.flush_cadences()
            state.set_status(words.RUNNING, STARTING if trainer.step == 0 else TRAINING)
            state.publish(force=True)
            started = True
            status = trainer.run(stop_event=state.stop_event, max_steps=max_steps)
        except (RunLockedError, ConfigError, DataError, CheckpointError, FileExistsError) as exc:
            # Refused before a step (a held run, bad data): nothing ran, unless the trainer had begun
            status, message = (words.CRASHED, f"crashed: {exc}") if started else (None, f"Could not start: {exc}")
        except Exception as exc:  # the trainer recorded "crashed" in meta.json; the workbench says why
            log.exception("in-process training failed")
            why = f"{type(exc).__name__}: {exc}"
            status, message = (words.CRASHED, f"crashed: {why}") if started else (None, f"Could not start: {why}")
        self.finish(trainer, status, message)

    def end_paused(self, status: str) -> None:
        """End a paused in-process run the way the trainer ends one: final checkpoint, status, lock released."""
        trainer, message = self.state.trainer, None
        try:
            status = trainer.end(status)
        except (OSError, CheckpointError) as exc:  # e.g. a full disk: the run cannot be said to have stopped cleanly
            log.exception("ending the paused run failed")
            status, message = words.CRASHED, f"crashed while writing the final checkpoint: {exc}"
        self.finish(trainer, status, message)

    def finish(self, trainer: Any, status: str | None, message: str | None) -> None:
        """Show how the run ended (or paused), or, refused before any step, what was shown before."""
        state = self.state
        with state.lock:
            if status is None:  # refused before any step: back to what was shown before
                state.set_status(IDLE if state.run_dir is None else state.status, "", message or "")
                return
            state.trainer = trainer if status == words.PAUSED else None
            state.step = int(trainer.last_step)
            state.poll_live()
            if message is None:
                message = f"{status} at step {state.step} of {state.total}" + (
                    ": Step N goes on, Start trains to the end, Stop ends the run." if status == words.PAUSED else ".")
            state.set_status(status, "", message)

    def watch(self) -> None:
        """Follow the in-process run's stream and phase until its job ends (the trainer's thread is busy)."""
        state = self.state
        while not state.idle.wait(state.poll_every):
            state.poll_live()
            state.publish()
        state.publish(force=True)
