"""One writer per run directory (design §4): an OS-level lock on `<run>/.lock`, held for the life of a trainer.

`flock` is released by the kernel when its holder dies however it dies, so a lock left by a killed process is free
again by construction; the file's content (pid, host, start time, command) only serves to name the holder in the
refusal, and to say that an earlier holder went away. Readers never take the lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from jepa_core.common.atomic import open_run_file

LOCK_NAME = ".lock"


class RunLockedError(RuntimeError):
    """Another live process holds the run; the message names it."""

    def __init__(self, root: Path, holder: dict[str, Any]):
        self.root, self.holder = root, holder
        super().__init__(f"run {root} is held by {describe_holder(holder)}; wait for it to end or stop it first "
                         f"(the lock is {root / LOCK_NAME})")


def describe_holder(holder: dict[str, Any]) -> str:
    since = holder.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else "?"
    return f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')} (since {when})"


def _read(fd: int) -> dict[str, Any]:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = b""
    while chunk := os.read(fd, 65536):
        raw += chunk
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


# A reader (doctor, the monitor) learns whether a run is held by taking a shared lock for an instant; a writer that
# starts in that instant must not take it for another writer. So the writer tries again for this long, sleeping
# between tries: a reader's probe lasts microseconds, a writer holds the lock for its life.
WRITER_PATIENCE_SECONDS = 0.5


def _take(fd: int) -> bool:
    deadline = time.monotonic() + WRITER_PATIENCE_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)


class RunLock:
    """Exclusive, non-blocking lock of one run directory. `acquire` raises RunLockedError naming a live holder."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.path = self.root / LOCK_NAME
        self._fd: int | None = None
        self.previous: dict[str, Any] = {}  # what a dead earlier holder left in the file, if anything

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunLock:
        if self._fd is not None:
            return self
        fd = open_run_file(self.path, os.O_RDWR | os.O_CREAT)  # never through a planted link
        if not _take(fd):
            holder = _read(fd)
            os.close(fd)
            raise RunLockedError(self.root, holder) from None
        self.previous = _read(fd)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
                  "command": " ".join(sys.argv)[:500]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.ftruncate(fd, 0)  # an empty file says "free"; the file stays so that no one races on its inode
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_holder(root: str | os.PathLike) -> dict[str, Any] | None:
    """The live holder's record (pid, host, since, command), or None when nobody holds the run. Never blocks."""
    path = Path(root) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd) or {"pid": "?", "host": "?"}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
