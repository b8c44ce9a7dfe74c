"""Atomic file writes: a temp file beside the target, fsync, rename over it; and the clean-up of temp files that an
interrupted write left behind (`.NAME.XXXX.tmp`), which only the run's lock holder may do."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

_TEMP_FILE = re.compile(r"^\..+\.tmp$")


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """Yield a binary handle on a temp file; on a clean exit it is fsynced and renamed onto `path`, on any error
    (KeyboardInterrupt too) it is removed and `path` is untouched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write(path: Path, data: bytes) -> None:
    with atomic_file(path) as fh:
        fh.write(data)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def remove_stale_temp_files(folder: Path) -> list[Path]:
    """Delete `.NAME.XXXX.tmp` files in `folder` (not below it); returns what was removed."""
    if not folder.is_dir():
        return []
    removed = []
    for entry in folder.iterdir():
        if entry.is_file() and _TEMP_FILE.match(entry.name):
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed
