"""The canonical metric stream: `metrics.jsonl` (design §5): row encoding, the writer and the resume purge.

One strict RFC 8259 JSON object per line. Non-finite floats travel as the strings "NaN", "Infinity" and
"-Infinity" so a strict parser accepts every line and a NaN loss is never lost. Rows carry `attempt`; a resumed
run appends rows with a higher attempt and readers apply TensorBoard's orphan purge without rewriting the file.

`iter_rows` reads decoded rows back one by one. The fast columnar reader is `jepa_core.metrics.reader` (read_metrics,
MetricsTable) and following a live file is `jepa_core.metrics.follower` (MetricsFollower); both build on this module.
Both readers also read a finished stream kept gzip-compressed (`metrics.jsonl.gz`, an archived run or a record of
the detection library), whole; a live file is always plain.
"""

from __future__ import annotations

import errno
import math
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import numpy as np
import pandas as pd

from jepa_core.common.atomic import open_run_file

NAN_TOKEN, POS_INF_TOKEN, NEG_INF_TOKEN = "NaN", "Infinity", "-Infinity"
TOKEN_TO_FLOAT = {NAN_TOKEN: math.nan, POS_INF_TOKEN: math.inf, NEG_INF_TOKEN: -math.inf}
# Keys whose values are prose or names, never numbers: a message that reads "NaN" stays a string.
TEXT_FIELDS = frozenset({"event", "rule", "severity", "metric", "message", "name", "text"})
ALERT_COLUMNS = ("step", "attempt", "rule", "severity", "metric", "value", "message")
READ_CHUNK_BYTES = 4 * 1024 * 1024  # measured: chunks this size stay in cache; peak memory stays near the frame
GZIP_SUFFIX = ".gz"
STREAM_NAME = "metrics.jsonl"
ARCHIVED_STREAM_NAME = STREAM_NAME + GZIP_SUFFIX

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


# ---------------------------------------------------------------------------------------------- encoding
def _plain(value: Any, key: str) -> Any:
    """Turn a value into something strict JSON can hold; `key` only names the culprit in errors."""
    kind = type(value)
    if kind is float:
        if math.isfinite(value):
            return value
        return NAN_TOKEN if math.isnan(value) else (POS_INF_TOKEN if value > 0 else NEG_INF_TOKEN)
    if kind in (int, str, bool) or value is None:
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"metric row key {k!r} inside {key!r} is not a string")
            out[k] = _plain(v, f"{key}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, key) for v in value]
    if isinstance(value, float):  # float subclasses such as numpy.float64
        return _plain(float(value), key)
    if isinstance(value, int):
        return int(value)
    if hasattr(value, "shape") and hasattr(value, "tolist"):  # numpy arrays/scalars, torch tensors
        if hasattr(value, "detach"):
            value = value.detach().cpu()
        plain = value.tolist()
        return _plain(plain, key)
    raise TypeError(f"metric {key!r}: cannot encode a value of type {kind.__name__} as JSON")


def to_plain_row(row: dict) -> dict:
    """Tensors / numpy scalars -> Python numbers; non-finite floats kept as floats (for sinks that want them)."""
    out = {}
    for key, value in row.items():
        if not isinstance(key, str):
            raise TypeError(f"metric row key {key!r} is not a string")
        if type(value) is float or value is None or type(value) in (int, str, bool):
            out[key] = value
        else:
            plain = _plain(value, key)
            out[key] = TOKEN_TO_FLOAT.get(plain, plain) if isinstance(plain, str) else plain
    return out


def encode_row(row: dict) -> str:
    """One strict JSON line (no trailing newline); non-finite floats become "NaN"/"Infinity"/"-Infinity"."""
    if not isinstance(row, dict):
        raise TypeError(f"a metric row must be a dict, got {type(row).__name__}")
    plain = {}
    for key, value in row.items():
        if not isinstance(key, str):
            raise TypeError(f"metric row key {key!r} is not a string")
        plain[key] = _plain(value, key)
    return _encoder.encode(plain).decode()


def _restore_non_finite(row: dict) -> dict:
    for key, value in row.items():
        if type(value) is str and value in TOKEN_TO_FLOAT and key not in TEXT_FIELDS:
            row[key] = TOKEN_TO_FLOAT[value]
    return row


def decode_row(line: str | bytes) -> dict:
    """Inverse of `encode_row`. Raises ValueError for invalid JSON, a non-object, or a missing integer step."""
    try:
        row = _decoder.decode(line)
    except msgspec.DecodeError as exc:
        raise ValueError(f"invalid JSON: {exc}") from None
    reason = _row_problem(row)
    if reason:
        raise ValueError(reason)
    return _restore_non_finite(row)


def _row_problem(row: Any) -> str | None:
    if type(row) is not dict:
        return f"not a JSON object (got {type(row).__name__})"
    step = row.get("step")
    if type(step) is not int:
        return "missing integer 'step'" if step is None else f"'step' is not an integer: {step!r}"
    if type(row.get("attempt", 0)) is not int:
        return f"'attempt' is not an integer: {row['attempt']!r}"
    return None


# ---------------------------------------------------------------------------------------------- writing
class JsonlWriter:
    """Append-only, line-atomic writer: each row is one os.write of the whole line, so it is flushed per row."""

    def __init__(self, path: str | os.PathLike, attempt: int) -> None:
        if type(attempt) is not int or attempt < 0:
            raise ValueError(f"attempt must be a non-negative integer, got {attempt!r}")
        self.path = Path(path)
        self.attempt = attempt
        self._fd: int | None = open_run_file(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        # A crash may have left a torn line without "\n"; end it so our first row is not glued onto it.
        size = os.fstat(self._fd).st_size
        if size:
            with open(self.path, "rb") as existing:
                existing.seek(size - 1)
                if existing.read(1) != b"\n":
                    self._write_bytes(b"\n")

    def _write_bytes(self, data: bytes) -> None:
        if self._fd is None:
            raise ValueError(f"{self.path}: writer is closed")
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def write(self, row: dict) -> None:
        step = row.get("step")
        if type(step) is not int:
            raise ValueError(f"{self.path}: every row needs an integer 'step', got {step!r}")
        if row.get("attempt", self.attempt) != self.attempt:
            raise ValueError(f"{self.path}: row carries attempt {row['attempt']!r}, the writer is attempt {self.attempt}")
        line = encode_row({"step": step, "attempt": self.attempt, **row}) + "\n"
        self._write_bytes(line.encode())

    def fsync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------- resume purge
def _purge_thresholds(first_step_by_attempt: dict[int, int]) -> dict[int, float]:
    """attempt -> the step from which its rows are superseded by a later attempt (inf when none)."""
    thresholds: dict[int, float] = {}
    later_min = math.inf
    for attempt in sorted(first_step_by_attempt, reverse=True):
        thresholds[attempt] = later_min
        later_min = min(later_min, first_step_by_attempt[attempt])
    return thresholds


def _keep_mask(steps: np.ndarray, attempts: np.ndarray, thresholds: dict[int, float]) -> np.ndarray:
    if len(steps) == 0 or all(math.isinf(t) for t in thresholds.values()):
        return np.ones(len(steps), dtype=bool)
    known = np.array(sorted(thresholds), dtype=np.int64)
    limits = np.array([thresholds[a] for a in known], dtype=np.float64)
    return steps < limits[np.searchsorted(known, attempts)]


R = TypeVar("R", list, pd.DataFrame)


def apply_resume_purge(rows_or_frame: R) -> R:
    """Orphan purge: when attempt a's first row (file order) has step s, drop earlier attempts' rows with step >= s.

    Accepts a list of row dicts or a DataFrame with `step` and `attempt` columns (rows without attempt count as 0);
    returns the same kind, order preserved.
    """
    if isinstance(rows_or_frame, pd.DataFrame):
        frame = rows_or_frame
        if frame.empty:
            return frame
        steps = frame["step"].to_numpy(dtype=np.float64)
        attempts = (frame["attempt"].fillna(0) if "attempt" in frame else pd.Series(0, index=frame.index))
        attempts = attempts.to_numpy(dtype=np.int64)
        unique, first_index = np.unique(attempts, return_index=True)
        frame_firsts = {int(a): int(steps[i]) for a, i in zip(unique, first_index)}
        return frame[_keep_mask(steps, attempts, _purge_thresholds(frame_firsts))]
    rows = list(rows_or_frame)
    firsts: dict[int, int] = {}
    for row in rows:
        firsts.setdefault(int(row.get("attempt", 0)), row["step"])
    thresholds = _purge_thresholds(firsts)
    return [row for row in rows if row["step"] < thresholds[int(row.get("attempt", 0))]]


# ---------------------------------------------------------------------------------------------- reading rows
def stream_file(run_dir: str | os.PathLike) -> Path:
    """A run directory's metric stream: metrics.jsonl, or, where a finished run keeps only its archive (`gzip
    metrics.jsonl`, a record of the detection library), metrics.jsonl.gz. The plain file wins when both are there:
    a trainer that resumed an archived run writes it anew."""
    plain = Path(run_dir) / STREAM_NAME
    archived = plain.with_name(ARCHIVED_STREAM_NAME)
    return archived if not plain.is_file() and archived.is_file() else plain


def _blocks(path: Path, chunk_bytes: int) -> Iterator[tuple[bytes, int]]:
    """Yield (data, end) per read of about `chunk_bytes`, where data[:end] is whole lines each ending in "\n";
    then (tail, -1) for an unterminated last line, if any. The partial line at the end of a block is read again
    as the start of the next one, which is cheaper than gluing it onto the next block (a copy of the block)."""
    if path.suffix == GZIP_SUFFIX:
        yield from _gzip_blocks(path, chunk_bytes)
        return
    offset, size = 0, chunk_bytes
    with open(path, "rb") as handle:
        while True:
            handle.seek(offset)
            data = handle.read(size)
            end = data.rfind(b"\n") + 1
            if end:
                yield data, end
                offset, size = offset + end, chunk_bytes
            elif len(data) == size:
                size *= 2  # one line longer than a block: read more of it
            else:
                if data.strip():
                    yield data, -1
                return


def _gzip_blocks(path: Path, chunk_bytes: int) -> Iterator[tuple[bytes, int]]:
    """`_blocks` of a gzip-compressed stream, inflated as it is read (no seeking back: a gzip file can only rewind
    to its start). An archive cut short yields what it holds, its last partial line as the torn tail, as a plain
    file cut mid-line does; bytes that are not gzip are an OSError naming the file."""
    carry = b""
    inflate = zlib.decompressobj(wbits=31)  # 31: the deflate stream inside a gzip header and trailer
    with open(path, "rb") as handle:
        # A compressed read inflates to several times its size: read an eighth of a block at a time.
        while packed := handle.read(max(1, chunk_bytes // 8)):
            while packed:
                try:
                    carry += inflate.decompress(packed)
                except zlib.error as exc:
                    raise OSError(errno.EINVAL, f"not a readable gzip stream ({exc})", str(path)) from exc
                packed = b""
                if inflate.eof and inflate.unused_data:  # concatenated members, as `cat a.gz b.gz` makes
                    packed, inflate = inflate.unused_data, zlib.decompressobj(wbits=31)
            end = carry.rfind(b"\n") + 1
            if end:
                yield carry, end
                carry = carry[end:]
    if carry.strip():
        yield carry, -1


def iter_rows(path: str | os.PathLike, chunk_bytes: int = READ_CHUNK_BYTES) -> Iterator[dict]:
    """Decoded rows (metrics and events) in file order after the resume purge; bad and torn lines skipped.

    Two passes over the file keep memory bounded: the first learns each attempt's first step.
    """
    path = Path(path)
    firsts: dict[int, int] = {}
    for row in _iter_valid_rows(path, chunk_bytes):
        firsts.setdefault(row.get("attempt", 0), row["step"])
    thresholds = _purge_thresholds(firsts)
    for row in _iter_valid_rows(path, chunk_bytes):
        if row["step"] < thresholds[row.get("attempt", 0)]:
            yield _restore_non_finite(row)


def _decode_lines(lines: list[bytes]) -> list:
    """Every line that is valid JSON, decoded; blank and invalid lines dropped."""
    try:  # every line valid (no blank lines): decoded without a Python-level loop
        return list(map(_decoder.decode, lines))
    except msgspec.DecodeError:
        pass
    values = []
    for line in lines:
        try:
            values.append(_decoder.decode(line))
        except msgspec.DecodeError:
            continue
    return values


def _iter_valid_rows(path: Path, chunk_bytes: int) -> Iterator[dict]:
    for data, end in _blocks(path, chunk_bytes):
        lines = data.split(b"\n")[:-1] if end >= 0 else [data]  # the last piece is the carried partial line
        yield from (row for row in _decode_lines(lines) if _row_problem(row) is None)
