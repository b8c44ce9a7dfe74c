"""`SessionState`: every field a training session keeps, the `SessionView` read from them, and how they change.

The session's actions (on the notebook's thread) and its jobs (each on a thread of its own) change this state under
one lock, and `_publish` hands each new view to the notebook. What is done with the state is built on it:
jepa_core.workbench.following (runs another process trains) and jepa_core.workbench.session (in-process runs, and
the notebook's buttons).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from jepa_core.run import status as words
from jepa_core.run.control import write_control
from jepa_core.workbench.detached import DetachedRun
from jepa_core.workbench.live import LiveRun, LiveTable
from jepa_core.workbench.panel import latest_mask_artifact, mask_overlay_png
from jepa_core.workbench.plan import Plan
from jepa_core.workbench.runs import DEFAULT_ROOTS
from jepa_core.workbench.view import (
    IDLE,
    IN_PROCESS,
    TRAINING,
    Publisher,
    SessionView,
    Watcher,
    eta_of,
    trainer_phase,
)


class SessionState:
    """One session's state, one run at a time: what it shows, the job threads it starts and the views it publishes."""

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
        self._slider_origin: str | None = None  # what those sliders started from (the notebook's preset)
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
                               epoch=self._epoch, version=self._publisher.version,
                               alerts=0 if table is None else len(table.alerts))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the current job ends (tests); True when it did."""
        return self._idle.wait(timeout)

    def mask_overlay(self, count: int = 4) -> bytes | None:
        """PNG of the current batch's masks over its images (one step's pair), else the run's newest mask PNG."""
        trainer = self._trainer
        batch = getattr(trainer, "last_batch", None)  # read once: images and masks of the same step
        if batch is not None:
            return mask_overlay_png(batch, int(trainer.cfg.model.patch_size), count)
        return latest_mask_artifact(self._run_dir)

    # ------------------------------------------------------------------------------------------------ state
    def _refusal(self, plan: Plan | None) -> str | None:
        if self._mode == IN_PROCESS and self.busy:
            return "Busy training: Stop first."
        if self._mode == IN_PROCESS and self._trainer is not None:
            return "A paused run is open: Stop it first (Step N and Start continue it)."
        if plan is None:
            return "Fix the config first."
        return None

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
