"""Graceful stop on SIGTERM and SIGINT for the headless trainer.

The first signal only raises a flag; the loop reads it after the step in progress, writes a final checkpoint,
closes every sink and records status `stopped`. A scheduler's preemption (SIGTERM) or Ctrl-C therefore loses at
most the step in flight, and never interrupts a checkpoint write. A second signal restores the default action,
so it ends the process at once (the temp files it may leave are removed by the next start).

Handlers can only be installed from the main thread; elsewhere (a notebook's training thread) this is a no-op
flag that only `request()` sets.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

HANDLED = (signal.SIGTERM, signal.SIGINT)


class GracefulStop:
    """A stop flag with the `is_set()` of threading.Event, raised by the first SIGTERM/SIGINT while installed."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._requested = False
        self._previous: dict[int, object] = {}

    def is_set(self) -> bool:
        return self._requested

    def request(self, reason: str = "request") -> None:
        self.signal_name = self.signal_name or reason
        self._requested = True

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.request(signal.Signals(signum).name)
        for sig in HANDLED:  # the next one is not graceful
            signal.signal(sig, signal.SIG_DFL)

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for sig in HANDLED:
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
