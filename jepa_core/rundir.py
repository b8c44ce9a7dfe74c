"""The run directory of SPEC §4: config.toml, meta.json, metrics.jsonl, checkpoints/, tensorboard/, artifacts/."""

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
from jepa_core.config import Config, ConfigError, load_config, save_config


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


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


def read_meta(root: Path) -> dict[str, Any]:
    path = RunPaths(root).meta
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: malformed JSON: {exc}") from exc


def create_run(cfg: Config, name: str | None = None) -> RunPaths:
    """Make a fresh run directory. Refuses to touch an existing one (resume it instead)."""
    runs_dir = Path(cfg.logging.runs_dir)
    name = name or cfg.logging.name or default_run_name()
    root = runs_dir / name
    if root.exists():
        raise FileExistsError(f"run directory {root} already exists: resume it with --resume {root} or pick --name")
    runs_dir.mkdir(parents=True, exist_ok=True)
    # Build the skeleton beside the target and rename it in, so no half-written run directory is ever visible.
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=runs_dir))
    paths = RunPaths(staging)
    save_config(cfg, paths.config)
    paths.checkpoints.mkdir()
    paths.artifacts.mkdir()
    os.replace(staging, root)
    return RunPaths(root)


def load_run_config(root: Path) -> Config:
    return load_config(RunPaths(root).config)


def start_meta(paths: RunPaths, cfg: Config, device: torch.device, world_size: int) -> dict[str, Any]:
    """Write meta.json at the start of an attempt; `attempt` counts starts (1 for a fresh run)."""
    previous = read_meta(paths.root)
    attempt = int(previous.get("attempt", 0)) + 1
    meta = {
        **previous,
        "name": paths.root.name,
        "attempt": attempt,
        "status": "running",
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


def finish_meta(paths: RunPaths, status: str, last_step: int) -> None:
    meta = read_meta(paths.root)
    meta.update({"status": status, "end_time": time.time(), "last_step": last_step})
    write_json_atomic(paths.meta, meta)
