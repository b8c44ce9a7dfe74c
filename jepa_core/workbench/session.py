"""`TrainingSession`: what the train notebook's buttons do, as a plain object that tests drive without a browser.

One session shows one run at a time. It is composed, not inherited, of three plain-named parts:
- `state` (`SessionState`, jepa_core.workbench.session_state): every field, the lock, the view it publishes;
- `in_process` (`InProcessRuns`, jepa_core.workbench.in_process): a `Trainer` runs on a job thread; a watcher
  thread follows its metrics.jsonl and its phase;
- `detached` (`DetachedRuns`, jepa_core.workbench.following): a `jepa train` process trains; a job thread follows
  its run directory (only new bytes are read).
Both kinds of run are handed the same `state`. This class is the buttons: each action takes the lock, lets the part
that owns the run act, and publishes. Jobs run on threads made by `thread_factory` (`mo.Thread` in the notebook, so
that `on_change` may set marimo state; `threading.Thread` in tests).
Every action replaces the one message the workbench shows; the end of a run replaces it with how it ended.
Status words are jepa_core.run.status's, verbatim; before any run the session is "idle".
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from jepa_core.workbench.following import DetachedRuns
from jepa_core.workbench.in_process import InProcessRuns
from jepa_core.workbench.live import LiveTable
from jepa_core.workbench.panel import latest_mask_artifact, mask_overlay_png
from jepa_core.workbench.plan import Plan
from jepa_core.workbench.runs import DEFAULT_ROOTS, RunInfo
from jepa_core.workbench.session_state import SessionState
from jepa_core.workbench.view import DETACHED, Publisher, SessionView, Watcher


class TrainingSession:
    """Start, Step N, Stop, Launch detached, resume, rewind, list and reattach, follow, live cadences: one run at a
    time, shown through `view()`."""

    def __init__(self, roots: Iterable[str | Path] = DEFAULT_ROOTS,
                 thread_factory: Callable[..., threading.Thread] = threading.Thread,
                 on_change: Callable[[SessionView], None] | None = None,
                 watch: Mapping[str, Watcher] | None = None,
                 publish_every: float = 1.0, poll_every: float = 0.5) -> None:
        """`on_change` gets each new view (throttled); `watch` maps a view field to a callback, or `(callback,
        seconds)`, that gets its value only when it changed ("epoch": the run or its status changed, "rows":
        there is something new to chart), so that what depends on it is not rebuilt every second."""
        self.state = SessionState(roots=[Path(r) for r in roots], spawn=thread_factory,
                                  publisher=Publisher(on_change, watch, publish_every), poll_every=poll_every)
        self.in_process = InProcessRuns(self.state)
        self.detached = DetachedRuns(self.state)

    # ------------------------------------------------------------------------------------------------ reading
    @property
    def roots(self) -> list[Path]:
        return self.state.roots

    @property
    def busy(self) -> bool:
        return self.state.busy

    @property
    def table(self) -> LiveTable | None:
        """The shown run's metrics (scalars, alerts), or None before its stream is open."""
        return self.state.table

    def view(self) -> SessionView:
        return self.state.view()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the current job ends (tests); True when it did."""
        return self.state.wait(timeout)

    def running_runs(self) -> list[RunInfo]:
        """Runs a live writer holds now, listed afresh on each call (a run launched a moment ago included)."""
        return self.detached.running_runs()

    def resumable_runs(self) -> list[RunInfo]:
        """Ended runs that can go on (stopped, stopped on an alert, crashed) and hold a checkpoint to go on from."""
        return self.detached.resumable_runs()

    def mask_overlay(self, count: int = 4) -> bytes | None:
        """PNG of the current batch's masks over its images (one step's pair), else the run's newest mask PNG."""
        trainer = self.state.trainer
        batch = getattr(trainer, "last_batch", None)  # read once: images and masks of the same step
        if batch is not None:
            return mask_overlay_png(batch, int(trainer.cfg.model.patch_size), count)
        return latest_mask_artifact(self.state.run_dir)

    # ------------------------------------------------------------------------------------------------ in-process
    def start(self, plan: Plan | None) -> str:
        """Train in this process to the end (a paused run goes on from where it is)."""
        return self._act(self.in_process.train, plan, None)

    def step(self, plan: Plan | None, n: int) -> str:
        """Train n more steps and pause (a new run when none is paused)."""
        return self._act(self.in_process.train, plan, max(1, int(n)))

    # ------------------------------------------------------------------------------------------------ detached
    def launch_detached(self, plan: Plan | None) -> str:
        """Start a `jepa train` process for the plan and follow it."""
        return self._act(self.detached.launch, plan)

    def resume(self, path: str | Path) -> str:
        """Go on with a stopped or crashed run from its latest checkpoint, in a `jepa train --resume` process, and
        follow it."""
        return self._act(self.detached.resume, Path(path))

    def rewind(self, parent: str | Path, alert: Mapping[str, Any], changes: Mapping[str, Any],
               name: str = "") -> str:
        """Branch `parent` from the checkpoint before `alert` (a row of its alert table: step, rule, severity) with
        `changes` (`section.key` -> value), as `jepa rewind --alert` does; train the branch in a detached `jepa
        train --resume` and follow it. The parent is only read."""
        return self._act(self.detached.rewind, Path(parent), alert, changes, name)

    def reattach(self, path: str | Path) -> str:
        """Follow a run another process (or an earlier kernel) is writing."""
        return self._act(self.detached.reattach, Path(path))

    # ------------------------------------------------------------------------------------------------ either
    def stop(self) -> str:
        """Stop the shown run, whichever process trains it."""
        state = self.state
        with state.lock:
            if self.in_process.open:
                self.in_process.stop()
            elif state.mode == DETACHED and state.busy:
                self.detached.stop()
            else:
                state.say("Nothing to stop.")
        return state.published_message()

    def set_cadences(self, values: Mapping[str, Any], origin: str | None = None) -> str | None:
        """Slider values in; the ones that moved since last seen go to the open run's control.json (read by the
        trainer before its next step). The first call only records the sliders' positions, and so does a call with
        another `origin` (sliders rebuilt at another preset's cadences: nobody moved them for the open run)."""
        state = self.state
        values = {k: int(v) for k, v in values.items()}
        with state.lock:
            rebuilt, state.slider_origin = origin != state.slider_origin, origin
            seen, state.slider = (None if rebuilt else state.slider), values
            moved = {k: v for k, v in values.items() if seen is not None and seen.get(k) != v}
            if not moved or not (state.busy or state.trainer is not None) or state.run_dir is None:
                return None
            state.pending.update(moved)
            state.flush_cadences()
            state.say("Cadence " + ", ".join(f"{k} = {v}" for k, v in moved.items())
                      + ": applied from the run's next step.")
        return state.published_message()

    def close(self, timeout: float = 120.0) -> None:
        """Stop following, stop an in-process run and end a paused one (a detached process keeps training)."""
        self.state.cancel.set()
        self.state.stop_event.set()
        self.state.wait(timeout)
        self.in_process.close()

    def _act(self, action: Callable[..., None], *args: Any) -> str:
        """One button: `action` under the lock, then the message it left, published."""
        with self.state.lock:
            action(*args)
        return self.state.published_message()

