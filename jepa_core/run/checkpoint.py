"""Checkpoints that are written atomically and proven intact before they are trusted.

Each checkpoint `X.pt` has a digest file `X.pt.digest` (JSON: sha256 and size of X.pt's bytes, and its step). The
digest is hashed while the checkpoint streams to disk and is renamed into place *before* the checkpoint itself, so
every checkpoint this version writes has a digest the moment it appears; a crash between the two renames leaves an
old `latest.pt` that no longer matches, which the loader then skips for the step file holding the same state.

`find_resume_checkpoint` takes the newest intact checkpoint among latest.pt and step_*.pt, ordered by the step they
hold (not by name), and says which files it skipped and why. Loading uses `weights_only=True`.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import torch

from jepa_core.common.atomic import atomic_file, atomic_write, remove_stale_temp_files

_STEP_FILE = re.compile(r"^step_(\d{7})\.pt$")
DIGEST_SUFFIX = ".digest"
LATEST = "latest.pt"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be found, read or trusted; the message names the file."""


class _HashingWriter:
    """A write-only file wrapper that hashes and counts every byte on its way to disk."""

    def __init__(self, fh: BinaryIO):
        self._fh, self.sha256, self.size = fh, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self._fh.write(data)

    def flush(self) -> None:
        self._fh.flush()


def digest_path(path: Path) -> Path:
    return path.with_name(path.name + DIGEST_SUFFIX)


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _copy(source: Path, target: Path) -> None:
    """`target` gets `source`'s bytes atomically. A copy, not a hard link: writing into one name in place (`cp x
    latest.pt` does) would then damage the other, and the two must fail independently."""
    with atomic_file(target) as fh, open(source, "rb") as src:
        shutil.copyfileobj(src, fh, 1 << 22)


def save_checkpoint(checkpoint_dir: Path, step: int, state: dict[str, Any]) -> Path:
    """Write step_XXXXXXX.pt, then point latest.pt at the same bytes; each file's digest lands before it does."""
    path = checkpoint_dir / f"step_{step:07d}.pt"
    with atomic_file(path) as fh:
        writer = _HashingWriter(fh)
        torch.save(state, writer)
        record = {"sha256": writer.sha256.hexdigest(), "bytes": writer.size, "step": int(state.get("step", step))}
        digest = (json.dumps(record) + "\n").encode()
        atomic_write(digest_path(path), digest)  # inside the block: the digest is in place before the rename
    latest = checkpoint_dir / LATEST
    atomic_write(digest_path(latest), digest)
    _copy(path, latest)
    return path


INITIAL = "init.pt"  # the context encoder's initial weights, for the weight-drift diagnostic


def save_initial_weights(checkpoint_dir: Path, weights: dict[str, Any]) -> Path:
    """init.pt with its digest (step 0), written like every checkpoint: the digest lands before the file does."""
    path = checkpoint_dir / INITIAL
    with atomic_file(path) as fh:
        writer = _HashingWriter(fh)
        torch.save(weights, writer)
        record = {"sha256": writer.sha256.hexdigest(), "bytes": writer.size, "step": 0}
        atomic_write(digest_path(path), (json.dumps(record) + "\n").encode())
    return path


def load_initial_weights(checkpoint_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(init.pt's weights, None), or (None, why not) when it is missing, fails its digest or does not load: only the
    drift diagnostic needs it, so a damaged one never blocks a resume. A digest-less init.pt (written before they
    had one) is loaded unverified."""
    path = checkpoint_dir / INITIAL
    if not path.is_file():
        return None, f"{path} is missing"
    if read_digest(path) is not None:
        why = verify_checkpoint(path)
        if why is not None:
            return None, f"{path} {why}"
    try:
        return torch.load(path, map_location="cpu", weights_only=True), None
    except Exception as exc:  # torch raises many types for a bad file
        return None, f"{path} does not load ({type(exc).__name__})"


def copy_checkpoint(source: Path, target_dir: Path, name: str | None = None) -> Path:
    """`source` and its digest into `target_dir` (a branch's first checkpoint), the digest first as when it was
    written; the copy is verified against the digest before it is trusted."""
    target = target_dir / (name or source.name)
    atomic_write(digest_path(target), digest_path(source).read_bytes())
    _copy(source, target)
    problem = verify_checkpoint(target)
    if problem:
        raise CheckpointError(f"checkpoint {target} {problem} (copied from {source})")
    return target


def list_checkpoints(checkpoint_dir: Path) -> list[tuple[int, Path]]:
    if not checkpoint_dir.is_dir():
        return []
    found = []
    for p in checkpoint_dir.iterdir():
        m = _STEP_FILE.match(p.name)
        if m:
            found.append((int(m.group(1)), p))
    return sorted(found)


def prune_checkpoints(checkpoint_dir: Path, keep_last: int, keep_steps: frozenset[int] = frozenset()) -> None:
    """Delete all but the newest `keep_last` step checkpoints (0 keeps them all) and those of `keep_steps` (the
    trainer keeps the checkpoint before each alert, to rewind to)."""
    if keep_last <= 0:
        return
    for step, path in list_checkpoints(checkpoint_dir)[:-keep_last]:
        if step in keep_steps:
            continue
        path.unlink(missing_ok=True)
        digest_path(path).unlink(missing_ok=True)


def clean_checkpoint_dir(checkpoint_dir: Path) -> list[Path]:
    """Remove temp files of interrupted writes and digests whose checkpoint never appeared. Only the run's lock
    holder may call this (another writer's temp file would be in flight). Returns what was removed."""
    removed = remove_stale_temp_files(checkpoint_dir)
    if checkpoint_dir.is_dir():
        for digest in checkpoint_dir.glob(f"*.pt{DIGEST_SUFFIX}"):
            if not digest.with_name(digest.name[: -len(DIGEST_SUFFIX)]).exists():
                digest.unlink(missing_ok=True)
                removed.append(digest)
    return removed


def read_digest(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(digest_path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}  # present but unreadable: the checkpoint cannot be verified
    return record if isinstance(record, dict) else {}


def verify_checkpoint(path: Path) -> str | None:
    """None when `path` matches its digest, else why not (a sentence naming no path)."""
    record = read_digest(path)
    if record is None:
        return f"has no {DIGEST_SUFFIX} file (not written by this version, or its write was interrupted)"
    if not {"sha256", "bytes"} <= set(record):
        return f"its {DIGEST_SUFFIX} file is unreadable"
    size = path.stat().st_size
    if size != record["bytes"]:
        return f"is {size} bytes, its digest says {record['bytes']} (truncated or interrupted write)"
    if _file_sha256(path) != record["sha256"]:
        return "does not match its sha256 digest (damaged on disk)"
    return None


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu", verify: bool = True) -> dict[str, Any]:
    """A checkpoint's state; with `verify`, only after its bytes matched their digest."""
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    if verify:
        problem = verify_checkpoint(path)
        if problem:
            raise CheckpointError(f"checkpoint {path} {problem}")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises several types for a damaged file; all mean the same to the caller
        raise CheckpointError(f"cannot load checkpoint {path}: {exc}") from exc


@dataclass
class ResumePoint:
    """What `find_resume_checkpoint` chose: the file and its state (None when nothing intact exists), and the
    files it passed over with the reason for each."""

    path: Path | None
    state: dict[str, Any] | None
    skipped: list[tuple[Path, str]] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"skipped {p}: {why}" for p, why in self.skipped]
        if self.path is not None:
            lines.append(f"resuming from {self.path} (step {self.state['step']})")
        return "\n".join(lines)


def _claimed_step(path: Path) -> int:
    """The step a checkpoint says it holds without loading it: its digest, else its name (latest.pt: -1)."""
    record = read_digest(path) or {}
    step = record.get("step")
    if isinstance(step, int):
        return step
    m = _STEP_FILE.match(path.name)
    return int(m.group(1)) if m else -1


def find_resume_checkpoint(checkpoint_dir: Path, map_location: str | torch.device = "cpu") -> ResumePoint:
    """The newest intact checkpoint (by the step it holds; latest.pt before a step file of the same step)."""
    candidates = [p for _, p in list_checkpoints(checkpoint_dir)]
    latest = checkpoint_dir / LATEST
    if latest.is_file():
        candidates.append(latest)
    candidates.sort(key=lambda p: (_claimed_step(p), p.name == LATEST), reverse=True)
    skipped: list[tuple[Path, str]] = []
    for path in candidates:
        try:
            state = load_checkpoint(path, map_location)
        except CheckpointError as exc:
            skipped.append((path, str(exc).replace(f"checkpoint {path} ", "").replace(f"{path}: ", "")))
            continue
        if not isinstance(state, dict) or not isinstance(state.get("step"), int):
            skipped.append((path, "holds no integer 'step'"))
            continue
        return ResumePoint(path, state, skipped)
    return ResumePoint(None, None, skipped)


def load_latest(checkpoint_dir: Path, map_location: str | torch.device = "cpu") -> tuple[Path, dict[str, Any]] | None:
    found = find_resume_checkpoint(checkpoint_dir, map_location)
    return (found.path, found.state) if found.path is not None else None


def latest_checkpoint(checkpoint_dir: Path) -> Path | None:
    return find_resume_checkpoint(checkpoint_dir).path
