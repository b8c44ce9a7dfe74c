"""Live control of a running trainer through `<run_dir>/control.json` (design §9: cadence sliders, Stop).

The notebook calls `write_control(run_dir, basic_every_steps=5)`; the file is validated first and replaced
atomically, so the trainer never reads half a file. The trainer calls `ControlWatcher.poll()` once per step:
one `os.stat`, and a re-read only when the file changed. The file holds the full current state (writes merge
into it), so applying what `poll` returns is idempotent.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from jepa_core.common.atomic import write_json_atomic
from jepa_core.config import CADENCE_KEYS

log = logging.getLogger(__name__)

CONTROL_FILE = "control.json"
STOP_KEY = "stop"


class ControlError(ValueError):
    """A control change or control file that does not validate; the message names the key."""


def validate_control(changes: dict[str, Any], source: str = "control") -> dict[str, Any]:
    """Return the changes if every key is known and every value valid; raise ControlError naming the key."""
    if not isinstance(changes, dict):
        raise ControlError(f"{source}: expected a JSON object, got {type(changes).__name__}")
    valid = CADENCE_KEYS  # the config's one list: the cadences a run has are the ones it can change live
    for key, value in changes.items():
        if key == STOP_KEY:
            if type(value) is not bool:
                raise ControlError(f"{source}: '{key}' must be true or false, got {value!r}")
        elif key in valid:
            if type(value) is not int or value <= 0:
                raise ControlError(f"{source}: '{key}' must be a positive integer, got {value!r}")
        else:
            raise ControlError(f"{source}: unknown key '{key}' (valid: {', '.join((*valid, STOP_KEY))})")
    return dict(changes)


def control_path(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / CONTROL_FILE


def read_control(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The validated control state ({} when there is no file). Raises ControlError for a bad file."""
    path = control_path(run_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ControlError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return validate_control(data, source=str(path))


def write_control(run_dir: str | os.PathLike, **changes: Any) -> dict[str, Any]:
    """Validate `changes`, merge them into the current state and replace the file atomically; returns the state.

    A control file that is currently invalid (edited by hand) is replaced by the new, valid state.
    """
    path = control_path(run_dir)
    validate_control(changes, source=f"write_control({path})")
    try:
        state = read_control(run_dir)
    except ControlError as exc:
        log.warning("%s; replacing it", exc)
        state = {}
    state.update(changes)
    write_json_atomic(path, state)  # a trainer polling the file never reads half of it
    return state


class ControlWatcher:
    """Cheap per-step check of control.json for a running trainer."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.path = control_path(run_dir)
        self.current: dict[str, Any] = {}  # last valid state
        self._signature: tuple[int, int, int] | None = None

    def poll(self) -> dict[str, Any] | None:
        """The validated control state when the file changed since the last poll, else None.

        A file that does not validate logs a warning naming the key and keeps the previous values.
        """
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._signature = None
            return None
        signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if signature == self._signature:
            return None
        self._signature = signature
        try:
            state = read_control(self.path.parent)
        except ControlError as exc:
            log.warning("ignoring control file: %s; keeping the previous values", exc)
            return None
        except OSError as exc:  # replaced between stat and read: the next poll sees the new file
            log.warning("could not read %s: %s", self.path, exc)
            self._signature = None
            return None
        self.current = state
        return dict(state)

    @property
    def stop_requested(self) -> bool:
        return bool(self.current.get(STOP_KEY, False))
