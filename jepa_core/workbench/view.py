"""What a training session shows (`SessionView`) and how views reach the notebook (`Publisher`)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

IDLE = "idle"  # no run yet in this session (not a run status: nothing is written)
BUILDING = "building data"
STARTING = "starting"
TRAINING = "training"
IN_PROCESS, DETACHED = "in-process", "detached"


@dataclass(frozen=True)
class SessionView:
    """What the workbench shows, taken at one moment."""

    status: str  # "idle" or a run status word (jepa_core.run.status), verbatim
    phase: str  # "building data", "starting", "evaluating step 0", "training" (shown as "step k of N"), or ""
    message: str  # the current action's message; replaced by the next action and by the run's end
    step: int  # the run's step (the trainer's own for an in-process run)
    total: int  # optim.steps of the run (0 when idle)
    eta_seconds: float | None
    mode: str | None  # "in-process", "detached" or None
    run_dir: Path | None
    busy: bool  # a job (training or following) is active
    rows: int  # rows in the followed table: changes when there is something new to chart
    epoch: int  # changes when the status or the run changes (the notebook re-lists running runs then)
    version: int = 0  # changes with every published view
    alerts: int = 0  # alerts in the followed table: the notebook rebuilds its alert table only when this changes

    @property
    def idle(self) -> bool:
        return self.status == IDLE

    def headline(self) -> tuple[Any, ...]:
        """What must reach the page at once when it changes (progress alone may wait)."""
        return self.status, self.phase, self.message, self.busy, self.epoch, self.run_dir


Watcher = Callable[[Any], None] | tuple[Callable[[Any], None], float]


class Publisher:
    """Hands views to `on_change`: at once when the headline changed, else at most every `every` seconds (the
    page updates at most about once a second). `watch` maps a view field to a callback that gets the field's new
    value only when it changed, optionally as `(callback, seconds)`: then at most that often, except when the
    headline changed or the publication is forced (a job's end), so its last value always arrives. The notebook
    re-lists running runs on "epoch" and redraws its charts on "rows" (a redraw costs the CPU the trainer uses).
    Thread-safe; callbacks run outside its lock."""

    def __init__(self, on_change: Callable[[SessionView], None] | None, watch: Mapping[str, Watcher] | None,
                 every: float) -> None:
        self._on_change, self._every = on_change, every
        self._watch = {name: w if isinstance(w, tuple) else (w, 0.0) for name, w in (watch or {}).items()}
        self._sent: dict[str, tuple[Any, float]] = {}  # field -> (value last handed on, when)
        self._lock = threading.Lock()
        self._last: SessionView | None = None
        self._at = 0.0
        self.version = 0

    def publish(self, view: SessionView, force: bool = False) -> None:
        with self._lock:
            last = self._last
            if last is not None and replace(view, version=last.version) == last:
                return
            now = time.monotonic()
            headline = last is None or view.headline() != last.headline()
            if not (headline or force) and now - self._at < self._every:
                return
            self.version += 1
            view = replace(view, version=self.version)
            self._last, self._at = view, now
            changed = []
            for name, (callback, period) in self._watch.items():
                value, (sent, sent_at) = getattr(view, name), self._sent.get(name, (None, -1e18))
                if name not in self._sent or (value != sent and (headline or force or now - sent_at >= period)):
                    self._sent[name] = (value, now)
                    changed.append((callback, value))
        if self._on_change is not None:
            self._on_change(view)
        for callback, value in changed:
            callback(value)


def trainer_phase(trainer_phase: str, step: int, fallback: str) -> str:
    """An in-process trainer's phase in the workbench's words ("ready" before its first step means starting)."""
    if trainer_phase.startswith("evaluating"):
        return trainer_phase
    if trainer_phase == TRAINING:
        return TRAINING
    if trainer_phase == "ready":
        return STARTING if step == 0 else TRAINING
    return fallback


def eta_of(table: Any) -> float | None:
    """The trainer's last logged ETA (time/eta_seconds) in a followed table, or None."""
    if table is None or "time/eta_seconds" not in table.scalars.columns:
        return None
    values = table.scalars["time/eta_seconds"].dropna()
    return float(values.iloc[-1]) if len(values) else None
