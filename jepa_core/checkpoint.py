"""Atomic checkpoints: write to a temporary file in the same directory, fsync, then rename over the target.

A crash mid-write leaves the previous checkpoint untouched; loading uses `weights_only=True`.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

_STEP_FILE = re.compile(r"^step_(\d{7})\.pt$")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be found or read; the message names the file."""


def atomic_torch_save(obj: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(checkpoint_dir: Path, step: int, state: dict[str, Any]) -> Path:
    """Write step_XXXXXXX.pt, then point latest.pt at the same content (each write atomic on its own)."""
    path = checkpoint_dir / f"step_{step:07d}.pt"
    atomic_torch_save(state, path)
    atomic_torch_save(state, checkpoint_dir / "latest.pt")
    return path


def list_checkpoints(checkpoint_dir: Path) -> list[tuple[int, Path]]:
    if not checkpoint_dir.is_dir():
        return []
    found = []
    for p in checkpoint_dir.iterdir():
        m = _STEP_FILE.match(p.name)
        if m:
            found.append((int(m.group(1)), p))
    return sorted(found)


def prune_checkpoints(checkpoint_dir: Path, keep_last: int) -> None:
    for _, path in list_checkpoints(checkpoint_dir)[:-keep_last]:
        path.unlink(missing_ok=True)


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises several types for a damaged file; all mean the same to the caller
        raise CheckpointError(f"cannot load checkpoint {path}: {exc}") from exc


def load_latest(checkpoint_dir: Path, map_location: str | torch.device = "cpu") -> tuple[Path, dict[str, Any]] | None:
    """latest.pt if it loads, else the newest step file that does (latest.pt may be what a crash interrupted)."""
    latest = checkpoint_dir / "latest.pt"
    candidates = ([latest] if latest.is_file() else []) + [p for _, p in reversed(list_checkpoints(checkpoint_dir))]
    for path in candidates:
        try:
            return path, load_checkpoint(path, map_location)
        except CheckpointError:
            continue
    return None


def latest_checkpoint(checkpoint_dir: Path) -> Path | None:
    found = load_latest(checkpoint_dir)
    return found[0] if found else None
