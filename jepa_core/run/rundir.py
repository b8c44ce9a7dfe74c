"""The run directory of design §4: config.toml, meta.json, metrics.jsonl, checkpoints/, tensorboard/, artifacts/.

meta.json is a convenience for readers, never the source of truth for the writer: the attempt number comes from
the stream (see `next_attempt`) and a missing or malformed meta.json is rewritten, not trusted.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import jepa_core
from jepa_core.common.atomic import UnsafeRunFileError, write_json_atomic
from jepa_core.config import Config, ConfigError, check_run_name, load_config, save_config
from jepa_core.metrics.stream import iter_rows
from jepa_core.run import status
from jepa_core.run.lock import LOCK_NAME, RunLock


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def meta(self) -> Path:
        return self.root / "meta.json"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def tensorboard(self) -> Path:
        return self.root / "tensorboard"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"


def default_run_name() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def read_meta(root: Path) -> dict[str, Any]:
    path = RunPaths(root).meta
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: malformed JSON: {exc}") from exc


def _meta_or_empty(root: Path) -> dict[str, Any]:
    """The previous meta.json for the writer: a malformed one is replaced, and the stream says what happened."""
    try:
        return read_meta(root)
    except ConfigError:
        return {}


def refuse_unwritable(folder: Path, what: str) -> None:
    """ConfigError naming `folder` when a file cannot be created in it (read-only disk or mount, no permission, a
    path through a file): asked before any work, so a run never builds its data only to fail at its first write.
    A real write, not os.access: root passes every permission check but not a read-only file system."""
    probe_dir = folder
    while not probe_dir.exists() and probe_dir != probe_dir.parent:
        probe_dir = probe_dir.parent  # the runs folder is created later: its nearest existing parent must take it
    try:
        fd, name = tempfile.mkstemp(prefix=".write-probe.", dir=probe_dir)
    except OSError as exc:
        raise ConfigError(f"{what} {folder}: cannot write there ({exc.strerror or exc}); nothing was written") from None
    os.close(fd)
    os.unlink(name)


def refuse_taken_run(runs_dir: Path, name: str) -> Path:
    """The directory a fresh run named `name` would get; FileExistsError when it is taken. Cheap, so a trainer
    asks it before building data and model: a taken name is bad input, refused before any work."""
    check_run_name("run name", name)  # also when the name comes from a run_dir path, not from logging.name
    root = Path(runs_dir) / name
    if root.exists():
        raise FileExistsError(f"run directory {root} already exists: resume it with --resume {root} or pick --name")
    return root


def create_run(cfg: Config, name: str | None = None) -> tuple[RunPaths, RunLock]:
    """Make a fresh run directory, locked for the caller. Refuses to touch an existing one (resume it instead)."""
    runs_dir = Path(cfg.logging.runs_dir)
    name = name or cfg.logging.name or default_run_name()
    root = refuse_taken_run(runs_dir, name)
    runs_dir.mkdir(parents=True, exist_ok=True)
    # Build the skeleton beside the target and rename it in, so no half-written run directory is ever visible.
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=runs_dir))
    paths = RunPaths(staging)
    # Locked before it becomes visible: flock follows the file through the rename, so no other writer can slip in.
    lock = RunLock(staging).acquire()
    save_config(cfg, paths.config)
    paths.checkpoints.mkdir()
    paths.artifacts.mkdir()
    try:
        os.replace(staging, root)
    except OSError:
        lock.release()
        raise FileExistsError(f"run directory {root} already exists: resume it with --resume {root} or pick --name")
    lock.root, lock.path = root, root / lock.path.name
    return RunPaths(root), lock


def refuse_planted_links(paths: RunPaths) -> None:
    """UnsafeRunFileError naming the file when the stream or the lock a writer appends to or rewrites is a symbolic
    link (a resume would write through it into the file it points to). The writer also opens both without following
    links; this says so before any work starts."""
    for path in (paths.metrics, paths.root / LOCK_NAME):
        if path.is_symlink():
            raise UnsafeRunFileError(f"{path} is a symbolic link: a run's own files must be plain files inside it "
                                     "(remove the link, then try again; nothing was written)")


def load_run_config(root: Path) -> Config:
    return load_config(RunPaths(root).config)


def start_meta(paths: RunPaths, cfg: Config, device: torch.device, world_size: int, attempt: int) -> dict[str, Any]:
    """Write meta.json at the start of an attempt (1 for a fresh run; the caller derives it from the stream)."""
    previous = _meta_or_empty(paths.root)
    meta = {
        **previous,
        "name": paths.root.name,
        "attempt": attempt,
        "status": status.RUNNING,
        "last_step": previous.get("last_step"),
        "start_time": previous.get("start_time", time.time()),
        "attempt_start_time": time.time(),
        "end_time": None,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "world_size": world_size,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "versions": {
            "jepa_core": jepa_core.__version__,
            "torch": torch.__version__,
            "python": sys.version.split()[0],
        },
        "faults": cfg.faults.active(),
        "total_steps": cfg.optim.steps,
    }
    write_json_atomic(paths.meta, meta)
    return meta


def set_status(paths: RunPaths, word: str, last_step: int) -> None:
    """Record the run's status (one of jepa_core.run.status.STATUSES) and its last step; ended runs get end_time."""
    if word not in status.STATUSES:
        raise ValueError(f"unknown run status {word!r}; known: {', '.join(status.STATUSES)}")
    meta = _meta_or_empty(paths.root)
    meta.update({"status": word, "last_step": last_step,
                 "end_time": time.time() if word in status.ENDED else None})
    write_json_atomic(paths.meta, meta)


def record_kept_checkpoints(paths: RunPaths, kept: dict[int, str]) -> None:
    """meta.json's list of the checkpoints kept past logging.keep_checkpoints, and why each one."""
    meta = _meta_or_empty(paths.root)
    meta["kept_checkpoints"] = [{"step": step, "file": f"checkpoints/step_{step:07d}.pt", "why": why}
                                for step, why in sorted(kept.items())]
    write_json_atomic(paths.meta, meta)


def finish_meta(paths: RunPaths, word: str, last_step: int) -> None:
    set_status(paths, word, last_step)


def next_attempt(metrics_path: Path) -> int:
    """One more than the largest attempt in the stream: the stream, not meta.json, says which attempts exist."""
    if not metrics_path.is_file():
        return 1
    return 1 + max((int(row.get("attempt", 0)) for row in iter_rows(metrics_path)), default=0)
