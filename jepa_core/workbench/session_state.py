"""`SessionState`: every field a training session keeps, the `SessionView` read from them, and how they change.

One plain dataclass, shared (not inherited) by the parts of a session (jepa_core.workbench.session): the buttons
(`TrainingSession`), in-process runs (`InProcessRuns`, jepa_core.workbench.in_process) and runs another process
trains (`DetachedRuns`, jepa_core.workbench.following). Each part is handed this one object, so every field a part
reads or writes is named at the place it does so (`state.run_dir`), and no part sees another's helpers.

The actions (on the notebook's thread) and the jobs (each on a thread of its own) change the state under one lock,
`lock`; `publish` hands each new view to the notebook. The helpers here are the ones both kinds of run need:
showing a status, refusing an action, switching runs, starting a job, following the live table.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from jepa_core.run import status as words
from jepa_core.run.control import write_control
from jepa_core.workbench.detached import DetachedRun
from jepa_core.workbench.live import LiveRun, LiveTable
from jepa_core.workbench.plan import Plan
from jepa_core.workbench.view import (
    DETACHED,
    IDLE,
    IN_PROCESS,
    TRAINING,
    Publisher,
    SessionView,
    eta_of,
    trainer_phase,
)


def _set_event() -> threading.Event:
    event = threading.Event()
    event.set()
    return event


@dataclass(eq=False)
class SessionState:
    """One session's state, one run at a time: what it shows, the job threads it starts and the views it publishes.

    Compared by identity (`eq=False`): it holds locks and a trainer, and two sessions are never "equal"."""

    roots: list[Path]  # where run directories are listed from
    spawn: Callable[..., threading.Thread]  # makes job threads (mo.Thread in the notebook: it may set marimo state)
    publisher: Publisher
    poll_every: float = 0.5  # seconds between two reads of a followed run
    lock: threading.RLock = field(default_factory=threading.RLock)
    # one reader of the followed stream at a time (the follower keeps offsets)
    poll_lock: threading.Lock = field(default_factory=threading.Lock)
    idle: threading.Event = field(default_factory=_set_event)  # set while no job runs
    stop_event: threading.Event = field(default_factory=threading.Event)  # the in-process trainer's stop_event
    cancel: threading.Event = field(default_factory=threading.Event)  # ends a follow job (the detached run goes on)
    trainer: Any = None  # an in-process Trainer, open while running or paused
    launched: DetachedRun | None = None  # the `jepa train` process this session started (None when reattached)
    live: LiveRun | None = None  # the shown run's table, kept up to date
    stop_asked: bool = False  # Stop was pressed for the current detached run
    stop_signalled: str = ""  # how it was signalled, when by SIGTERM (sent once)
    on_disk: bool = False  # the followed run's meta.json has been seen
    slider: dict[str, int] | None = None  # cadence values last seen from the sliders
    slider_origin: str | None = None  # what those sliders started from (the notebook's preset)
    pending: dict[str, int] = field(default_factory=dict)  # cadence changes waiting for the run directory
    plan_at_start: bool = True  # eval.at_start of the current run (its step-0 phase)
    status: str = IDLE
    phase: str = ""
    message: str = "No run yet: press Start, Step N or Launch detached."
    step: int = 0
    total: int = 0
    mode: str | None = None  # IN_PROCESS, DETACHED or None before any run
    run_dir: Path | None = None
    epoch: int = 0  # changes when the run or its status does (the notebook re-lists running runs then)

    # ------------------------------------------------------------------------------------------------ reading
    @property
    def busy(self) -> bool:
        return not self.idle.is_set()

    @property
    def table(self) -> LiveTable | None:
        live = self.live
        return None if live is None else live.table

    def view(self) -> SessionView:
        with self.lock:
            trainer, table = self.trainer, self.table
            step, phase, total = self.step, self.phase, self.total
            if trainer is not None and self.busy and self.status == words.RUNNING:
                step, total = int(trainer.step), int(trainer.cfg.optim.steps)
                phase = trainer_phase(str(trainer.phase), step, phase)
            return SessionView(status=self.status, phase=phase, message=self.message, step=step, total=total,
                               eta_seconds=eta_of(table) if phase == TRAINING else None, mode=self.mode,
                               run_dir=self.run_dir, busy=self.busy,
                               rows=0 if table is None else len(table.scalars) + len(table.alerts),
                               epoch=self.epoch, version=self.publisher.version,
                               alerts=0 if table is None else len(table.alerts))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the current job ends (tests); True when it did."""
        return self.idle.wait(timeout)

    # ------------------------------------------------------------------------------------------------ changing
    # These never call out (callers may hold the lock); `publish`, called without it, hands the changes on.
    def refusal(self, plan: Plan | None) -> str | None:
        """Why a new run cannot start now (an in-process run is open, or the config is bad), else None."""
        if self.mode == IN_PROCESS and self.busy:
            return "Busy training: Stop first."
        if self.mode == IN_PROCESS and self.trainer is not None:
            return "A paused run is open: Stop it first (Step N and Start continue it)."
        if plan is None:
            return "Fix the config first."
        return None

    def switch(self, mode: str, run_dir: Path | None, total: int) -> None:
        """Show another run (or the same run in another mode): its table starts afresh and the epoch moves on."""
        if run_dir != self.run_dir or mode != self.mode:
            self.live, self.on_disk = None, False
            self.epoch += 1
        self.mode, self.run_dir, self.total = mode, run_dir, int(total)
        if run_dir is None:
            self.step = 0

    def poll_live(self) -> None:
        live = self.live
        if live is not None:
            with self.poll_lock:
                live.poll()

    def flush_cadences(self) -> None:
        """Send the cadence changes waiting for the run directory, once its meta.json is there."""
        path = self.run_dir
        if self.pending and path is not None and (path / "meta.json").is_file():
            write_control(path, **self.pending)
            self.pending = {}

    def say(self, message: str) -> None:
        with self.lock:
            self.message = message

    def set_status(self, status: str, phase: str, message: str | None = None) -> None:
        with self.lock:
            if status != self.status:
                self.epoch += 1
            self.status, self.phase = status, phase
            if message is not None:
                self.message = message

    # ------------------------------------------------------------------------------------------------ jobs
    def begin(self, target: Callable[..., None], *args: Any) -> None:
        """Run `target(*args)` as the session's one job, on a thread of its own; the session is busy until it ends."""
        self.idle.clear()

        def job() -> None:
            try:
                target(*args)
            finally:
                self.idle.set()
                self.publish(force=True)

        self.spawn(target=job, daemon=True, name=f"jepa-{target.__name__.strip('_')}").start()

    def end_follow(self) -> None:
        """Stop following a detached run (it keeps training) before the session shows another; caller holds the
        lock, which is let go while the follow job winds down (it takes the lock to write its last progress)."""
        if self.mode == DETACHED and self.busy:
            self.cancel.set()
            self.lock.release()
            try:
                self.idle.wait(10)
            finally:
                self.lock.acquire()
        self.cancel.clear()

    # ------------------------------------------------------------------------------------------------ publishing
    def published_message(self) -> str:
        self.publish(force=True)
        return self.message

    def publish(self, force: bool = False) -> None:
        self.publisher.publish(self.view(), force)
