"""Following a live metrics.jsonl (design §5): each poll reads only the bytes appended since the previous one.

`poll_bytes` hands over the complete lines appended since the last poll, undecoded: a live table feeds them to the
one row reader (`jepa_core.metrics.line_scan.Scan`, framed by `jepa_core.metrics.reader.scan_table`; see
jepa_core.workbench.live). `poll` / `poll_update` decode the same lines into row dicts, one by one, for callers that
want rows rather than a table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jepa_core.metrics.stream import decode_row

_TAIL_CHECK_BYTES = 64  # bytes before our offset re-read each poll to notice a file rewritten in place


@dataclass
class FollowBytes:
    data: bytes  # the complete lines ("\n" included) appended since the previous poll, in file order
    reset: bool = False  # the file was truncated or replaced: discard everything read before


@dataclass
class FollowUpdate:
    rows: list[dict]  # new complete rows, decoded, in file order
    reset: bool = False  # the file was truncated or replaced: discard everything read before
    purge_from_step: int | None = None  # a newer attempt began at this step: drop older rows with step >= it


class MetricsFollower:
    """Tail a live metrics.jsonl: each poll reads only the bytes appended since the previous one.

    One follower serves one kind of caller: `line_no`, `bad_lines` and the attempt seen are kept by `poll_update`,
    so a caller of `poll_bytes` (which decodes elsewhere) does not mix in `poll_update` calls."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.offset = 0
        self.line_no = 0  # complete lines consumed so far
        self.bad_lines: list[tuple[int, str]] = []
        self.purged_from_step: int | None = None  # from the latest poll_update, for consumers of poll()
        self._pending = b""
        self._tail = b""  # the last bytes read, re-checked each poll to notice an in-place rewrite
        self._identity: tuple[int, int] | None = None
        self._max_attempt: int | None = None

    def _start_over(self) -> None:
        self.offset, self.line_no, self._pending, self._tail, self._max_attempt = 0, 0, b"", b"", None
        self.bad_lines = []

    def poll(self) -> list[dict]:
        return self.poll_update().rows

    def poll_bytes(self) -> FollowBytes:
        """The complete lines appended since the last poll (a partial last line is held back until its "\n")."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return FollowBytes(b"", reset=self._forget_file())
        reset = False
        identity = (stat.st_dev, stat.st_ino)
        if self._identity not in (None, identity) or stat.st_size < self.offset:
            self._start_over()
            reset = True
        self._identity = identity
        with open(self.path, "rb") as handle:
            new = self._read_new(handle, stat.st_size)
            if new is None:  # the bytes just before our offset changed: truncated and rewritten in place
                self._start_over()
                reset = True
                new = self._read_new(handle, stat.st_size) or b""
        if not new:
            return FollowBytes(b"", reset=reset)
        self.offset += len(new)
        self._tail = (self._tail + new)[-_TAIL_CHECK_BYTES:]
        data = self._pending + new
        cut = data.rfind(b"\n") + 1
        self._pending = data[cut:]
        return FollowBytes(data[:cut], reset=reset)

    def poll_update(self) -> FollowUpdate:
        """The rows appended since the last poll, decoded, and whether a newer attempt began among them."""
        self.purged_from_step = None
        appended = self.poll_bytes()
        rows: list[dict] = []
        for line in appended.data.split(b"\n")[:-1]:
            self.line_no += 1
            if not line.strip():
                continue
            try:
                row = decode_row(line)
            except ValueError as exc:
                self.bad_lines.append((self.line_no, str(exc)))
                continue
            attempt = row.get("attempt", 0)
            if self._max_attempt is not None and attempt > self._max_attempt:
                start = row["step"]
                self.purged_from_step = start if self.purged_from_step is None else min(start, self.purged_from_step)
            if self._max_attempt is None or attempt > self._max_attempt:
                self._max_attempt = attempt
            rows.append(row)
        return FollowUpdate(rows=rows, reset=appended.reset, purge_from_step=self.purged_from_step)

    def _read_new(self, handle: Any, size: int) -> bytes | None:
        """Bytes after our offset, or None when the last bytes we read before it are no longer there."""
        start = self.offset - len(self._tail)
        handle.seek(start)
        data = handle.read(size - start)
        if data[: len(self._tail)] != self._tail:
            return None
        return data[len(self._tail):]

    def _forget_file(self) -> bool:
        had_file = self._identity is not None
        if had_file:
            self._identity = None
            self._start_over()
        return had_file
