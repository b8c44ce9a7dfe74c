"""One run-status vocabulary (design §4), defined here and shown verbatim everywhere.

The trainer writes one of these words into meta.json; the monitor, the report, the train notebook and doctor read
it back through `run_status` (meta's word, except that a live claim whose writer is gone reads "crashed") and never
translate it into another word.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from jepa_core.run.lock import LOCK_NAME, lock_holder

RUNNING = "running"  # a trainer holds the run and is stepping
PAUSED = "paused"  # Step N finished its steps; the trainer is open and can go on
STOPPED = "stopped"  # Stop button, SIGTERM or SIGINT: a final checkpoint was written
STOPPED_ON_ALERT = "stopped_on_alert"  # a critical alert with rules.stop_on_critical
DIVERGED = "diverged"  # the loss or the weights turned non-finite; the last finite state is checkpointed
FINISHED = "finished"  # reached optim.steps
CRASHED = "crashed"  # an exception nobody handled, or a writer that vanished while "running"
UNKNOWN = "unknown"  # no meta.json, or a word this version does not know

STATUSES: tuple[str, ...] = (RUNNING, PAUSED, STOPPED, STOPPED_ON_ALERT, DIVERGED, FINISHED, CRASHED)
LIVE: frozenset[str] = frozenset({RUNNING, PAUSED})  # a process may still write the run
ENDED: frozenset[str] = frozenset({STOPPED, STOPPED_ON_ALERT, DIVERGED, FINISHED, CRASHED})
RESUMABLE: frozenset[str] = frozenset({PAUSED, STOPPED, STOPPED_ON_ALERT, CRASHED})  # --resume makes sense
EXIT_OK: frozenset[str] = frozenset({FINISHED, STOPPED, STOPPED_ON_ALERT, PAUSED})  # `jepa train` exits 0

DESCRIPTIONS: dict[str, str] = {
    RUNNING: "training",
    PAUSED: "paused after Step N; the trainer is open",
    STOPPED: "stopped on request; final checkpoint written",
    STOPPED_ON_ALERT: "stopped by a critical alert (rules.stop_on_critical)",
    DIVERGED: "loss or weights turned non-finite; last finite state checkpointed",
    FINISHED: "reached the configured number of steps",
    CRASHED: "ended by an unhandled error or a killed process",
    UNKNOWN: "status unknown (no readable meta.json)",
}


def normalise(declared: object) -> str:
    """The status word for a meta.json value: one of STATUSES, or "unknown"."""
    word = str(declared or "").strip().lower()
    return word if word in STATUSES else UNKNOWN


# -------------------------------------------------------------------------------------- observed status
# A run on another host whose meta says "running" but whose stream has not moved for this long is
# reported as crashed (its lock and process cannot be seen from here).
STALE_SECONDS = 120.0


def pid_alive(pid: Any) -> bool:
    """Whether a process with this id exists on this machine."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def writer_alive(path: Path | None, meta: dict[str, Any], last_update: float | None,
                 now: float | None = None) -> bool:
    """Whether the process that claims run `path` in its meta.json is still there.

    On this host the run's writer lock answers without blocking (the kernel releases it however its holder
    died); a run written before the lock existed falls back to meta's pid. On another host only the stream's
    mtime can tell: a stream quiet for STALE_SECONDS means the writer is gone.
    """
    same_host = meta.get("hostname") in (None, socket.gethostname())
    if same_host:
        if path is not None and (path / LOCK_NAME).exists():
            return lock_holder(path) is not None
        if "pid" in meta:
            return pid_alive(meta["pid"])
    now = time.time() if now is None else now
    return last_update is not None and now - last_update < STALE_SECONDS


def run_status(meta: dict[str, Any], last_update: float | None, now: float | None = None,
               path: Path | None = None) -> str:
    """The status word for a run: meta.json's, verbatim, except that a live claim without a live writer is
    "crashed". `path` (the run directory) lets the writer lock answer; without it meta's pid does."""
    declared = normalise(meta.get("status"))
    if declared not in LIVE:
        return declared
    alive = writer_alive(path, meta, last_update, now)
    return declared if alive else CRASHED


def run_last_step(meta: dict[str, Any], stream_last: int | None) -> int | None:
    """The run's last step: meta's last_step once the run ended or paused, else the stream's last step.

    The stream logs at cadences, so its last row can be a few steps short of where the run ended. While meta
    says "running" its last_step (if any) is an earlier attempt's, so the stream is the better guess; that
    holds for a run that crashed while running too."""
    recorded = meta.get("last_step")
    declared = normalise(meta.get("status"))
    if declared != RUNNING and isinstance(recorded, int) and not isinstance(recorded, bool):
        return recorded
    return stream_last
