"""One run-status vocabulary (SPEC §4), defined here and shown verbatim everywhere.

The trainer writes one of these words into meta.json; the monitor, the report, the train notebook and doctor read
it back through `normalise` and never translate it into another word.
"""

from __future__ import annotations

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
