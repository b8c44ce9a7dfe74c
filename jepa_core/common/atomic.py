"""Atomic file writes: a temp file beside the target, fsync, rename over it; the clean-up of temp files that an
interrupted write left behind (`.NAME.XXXX.tmp`), which only the run's lock holder may do; and `open_run_file`, how a
writer opens a file it keeps open (the lock, the stream) without ever following a link it did not create."""

from __future__ import annotations

import errno
import json
import os
import stat
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


class UnsafeRunFileError(FileExistsError):
    """A file of a run that is a symbolic link or not a regular file: a writer never writes through it."""


def open_run_file(path: Path, flags: int, mode: int = 0o644) -> int:
    """`os.open` that refuses a symbolic link (O_NOFOLLOW) and anything but a regular file, naming the path: a link
    planted as `.lock` or `metrics.jsonl` would make the writer truncate or append to the file it points to."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeRunFileError(f"{path} is a symbolic link: a run's own files must be plain files inside it "
                                     "(remove the link, then try again; nothing was written)") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeRunFileError(f"{path} is not a regular file (remove it, then try again; nothing was written)")
    return fd
