"""Training in a separate `jepa train` process that outlives the notebook's kernel and the browser tab."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from jepa_core.run.control import read_control, write_control
from jepa_core.run.lock import lock_holder

LOG_DIR = ".logs"  # under runs_dir; a dot-folder, so run discovery skips it
# The lock holder's command line when it is `jepa train` or `python -m jepa_core.train` (torchrun too): those stop
# gracefully on SIGTERM. Anything else holding a run (a notebook kernel) is asked through control.json instead.
_HEADLESS = re.compile(r"jepa_core[/\\]train\.py|\bjepa\s+train\b")


@dataclass(frozen=True)
class DetachedRun:
    """A `jepa train` process started from the workbench."""

    pid: int
    run_dir: Path
    log_path: Path
    # Kept so the launcher can poll() it: that reaps the exited child, which would otherwise linger as a zombie
    # that still answers "alive" to a pid check.
    process: subprocess.Popen | None = field(default=None, compare=False, repr=False)
    # A resume (`--resume`) keeps the run's meta.json stamp at launch (meta_stamp): until it changes, the status
    # there is the old end, not the resumed trainer's.
    resumed: bool = False
    launch_stamp: int | None = None

    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def log_tail(self, lines: int = 1) -> str:
        """The last non-empty lines of the process's console log ("" when there is none)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        kept = [line for line in text.splitlines() if line.strip()]
        return "\n".join(kept[-lines:])


def launch_detached(overrides: Sequence[str], name: str, preset_name: str = "tiny",
                    runs_dir: str | Path = "runs") -> DetachedRun:
    """Start `python -m jepa_core.train` in its own session (closing the tab or the kernel leaves it running).

    Console output goes to `<runs_dir>/.logs/<name>.log`. Raises FileExistsError when the run directory exists.
    """
    runs_dir = Path(runs_dir)
    if (runs_dir / name).exists():
        raise FileExistsError(f"run directory {runs_dir / name} already exists: pick another name")
    cmd = [sys.executable, "-m", "jepa_core.train", "--preset", preset_name, "--name", name, "--quiet",
           "--set", f"logging.runs_dir={json.dumps(str(runs_dir))}"]
    for override in overrides:
        cmd += ["--set", override]
    return _spawn(cmd, runs_dir / name, "w")


def resume_detached(run_dir: str | Path) -> DetachedRun:
    """Start `python -m jepa_core.train --resume RUN_DIR` in its own session: a stopped or crashed run goes on from
    its latest checkpoint to its configured steps. Console output is appended to `<runs_dir>/.logs/<name>.log`."""
    run_dir = Path(run_dir)
    stamp = meta_stamp(run_dir)
    cmd = [sys.executable, "-m", "jepa_core.train", "--resume", str(run_dir), "--quiet"]
    return _spawn(cmd, run_dir, "a", resumed=True, launch_stamp=stamp)


def meta_stamp(run_dir: Path) -> int | None:
    """meta.json's mtime_ns (None without one): changes when a trainer takes the run or writes its status."""
    try:
        return (run_dir / "meta.json").stat().st_mtime_ns
    except FileNotFoundError:
        return None


def _spawn(cmd: list[str], run_dir: Path, log_mode: str, **resume: object) -> DetachedRun:
    log_dir = run_dir.parent / LOG_DIR
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{run_dir.name}.log"
    with open(log_path, log_mode) as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    return DetachedRun(pid=proc.pid, run_dir=run_dir, log_path=log_path, process=proc, **resume)


def stop_detached(launched: DetachedRun | None, run_dir: Path | None) -> str:
    """Ask a run another process trains to stop after its current step; returns how it was asked.

    Our own child gets SIGTERM (graceful in `jepa train`, even while it still builds its data). A headless trainer
    on this host holding the run's lock gets SIGTERM too: the lock's holder is alive by construction, so the pid is
    never a stale one. Anything else (another host, a notebook kernel, which a signal would end) gets the control
    file's stop flag, read by every trainer before its next step.
    """
    if launched is not None and launched.process is not None and not launched.exited():
        launched.process.send_signal(signal.SIGTERM)
        return f"SIGTERM to pid {launched.pid}"
    holder = lock_holder(run_dir) if run_dir is not None else None
    if (holder and holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int)
            and _HEADLESS.search(str(holder.get("command", "")))):
        os.kill(holder["pid"], signal.SIGTERM)
        return f"SIGTERM to pid {holder['pid']}"
    if run_dir is not None and (run_dir / "meta.json").is_file() and not read_control(run_dir).get("stop"):
        write_control(run_dir, stop=True)  # written again on the next poll if a starting trainer clears it as stale
    return "stop flag in control.json"
