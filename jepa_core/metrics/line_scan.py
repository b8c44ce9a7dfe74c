"""One pass over the lines of metrics.jsonl into per-line columns, events and bad lines (design §5), for `reader`.

A whole file is fed block by block (`read_metrics`); a followed one poll by poll, each poll's complete appended lines
as one block (jepa_core.workbench.live). Lines keep their index in the file either way.

Most of the cost of reading JSON rows is building a dict per row. The scan avoids that: the lines of each
block are grouped by a cheap signature (their length in 64-byte buckets, from newline offsets found by numpy), and
each group is decoded by ONE msgspec call into a `Struct` whose fields are exactly the keys of the group's first
line (all required, unknown keys forbidden, step/attempt typed int, metrics typed number | "NaN" | "Infinity" |
"-Infinity"). msgspec thereby checks every line of the group against that key set and those types; numpy turns
the group into a 2-D float array with one `fromiter` and scatters its columns into per-line columns allocated
once. A group that fails is split by a finer signature (a hash of its lines without numbers) and decoded again;
what still fails (events, garbage, text values) goes through the generic path one line at a time, so correctness
never depends on the fast path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Literal

import msgspec
import numpy as np
from msgspec.structs import astuple

from jepa_core.metrics.line_columns import LineColumns
from jepa_core.metrics.stream import TOKEN_TO_FLOAT, _restore_non_finite, _row_problem

__all__ = ["Scan"]

_POSITION_KEYS = ("step", "attempt")
_NUMBER_BYTES = b"0123456789+-.eE"  # what JSON numbers are made of
_EXACT_INT_LIMIT = 2.0**53  # step/attempt travel through float64 on the fast path; exact below this
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NumberOrToken = float | Literal["NaN", "Infinity", "-Infinity"]  # msgspec accepts JSON ints for float fields
_UNRENAMABLE = re.compile(r'[\\"\x00-\x1f]')  # what msgspec.defstruct(rename=...) rejects in a field name

_decoder = msgspec.json.Decoder()


# ---------------------------------------------------------------------------------------------- grouping lines
def _line_bounds(data: bytes, end: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, stop) offsets of every line in data[:end], "\n" excluded; numpy finds them without line objects."""
    stops = np.flatnonzero(np.frombuffer(data, np.uint8, count=end) == 10)
    starts = np.empty_like(stops)
    starts[0] = 0
    starts[1:] = stops[:-1] + 1
    return starts, stops


def _groups(signatures: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(signature, positions) per distinct signature, groups in order of first appearance."""
    if (signatures == signatures[0]).all():
        return [(int(signatures[0]), np.arange(len(signatures)))]
    small = signatures.min() >= 0 and signatures.max() < 2**16
    order = np.argsort(signatures.astype(np.uint16) if small else signatures, kind="stable")  # uint16: radix sort
    ordered = signatures[order]
    bounds = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    groups = zip(ordered[np.r_[0, bounds]].tolist(), np.split(order, bounds))
    return sorted(groups, key=lambda pair: pair[1][0])


def _key_signatures(lines: list[bytes]) -> np.ndarray:
    """A hash of each line with the characters of numbers deleted, in effect of its keys (and string values):
    separates key sets that share a length bucket. Costs a pass over each line in C, so only failed buckets pay."""
    stripped = map(bytes.translate, lines, repeat(None), repeat(_NUMBER_BYTES))
    return np.fromiter(map(hash, stripped), np.int64, len(lines))


def _runs_text(view: memoryview, starts: np.ndarray, stops: np.ndarray, positions: np.ndarray) -> bytes | memoryview:
    """The lines at `positions` as one newline-separated text, copied run by run of consecutive lines."""
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    firsts = positions[np.r_[0, breaks]].tolist()
    lasts = positions[np.r_[breaks - 1, len(positions) - 1]].tolist()
    if len(firsts) == 1:
        return view[starts[firsts[0]]:stops[lasts[0]]]
    return b"\n".join([view[starts[f]:stops[l]] for f, l in zip(firsts, lasts)])


@dataclass
class _GroupDecoder:
    """Decodes lines of rows that all have exactly `keys` (step first, attempt second when present)."""

    decoder: msgspec.json.Decoder
    keys: tuple[str, ...]
    has_attempt: bool


def _canonical_keys(row: object) -> tuple[str, ...] | None:
    """The keys of a plain metric row (int step/attempt, numeric or non-finite-token values), step first; else None.

    None too for a key msgspec cannot rename a struct field to ('\\', '"' or a control character): metric names
    are data, and such a row is read by the generic path instead of failing the whole read."""
    if _row_problem(row) is not None or "event" in row:  # type: ignore[operator]
        return None
    for key, value in row.items():  # type: ignore[union-attr]
        if _UNRENAMABLE.search(key):
            return None
        kind = type(value)
        numeric = kind is float or kind is int or (kind is str and value in TOKEN_TO_FLOAT)
        if not numeric and key not in _POSITION_KEYS:
            return None
    return ("step",) + (("attempt",) if "attempt" in row else ()) + tuple(k for k in row if k not in _POSITION_KEYS)


def _make_group_decoder(keys: tuple[str, ...]) -> _GroupDecoder:
    # Metric names are not identifiers ("target/std_mean"), so fields are f0..fN renamed to the JSON keys.
    fields = [(f"f{i}", int if key in _POSITION_KEYS else _NumberOrToken) for i, key in enumerate(keys)]
    record = msgspec.defstruct("MetricRecord", fields, forbid_unknown_fields=True, gc=False,
                               rename={f"f{i}": key for i, key in enumerate(keys)})
    return _GroupDecoder(msgspec.json.Decoder(record), keys, "attempt" in keys)


# ---------------------------------------------------------------------------------------------- the scan
class Scan:
    """One pass over the file, chunk by chunk, into `LineColumns` plus events and bad lines."""

    def __init__(self) -> None:
        self.columns = LineColumns()
        self.lines = 0  # lines seen so far, i.e. the 0-based index of the next line
        self.events: list[tuple[int, dict]] = []
        self.bad: list[tuple[int, str]] = []
        self.torn = 0
        self.first_row: dict[int, tuple[int, int]] = {}  # attempt -> (line index, step) of its first row
        self._by_signature: dict[tuple[str, int], _GroupDecoder] = {}
        self._by_keys: dict[frozenset[str], _GroupDecoder] = {}

    def add_block(self, data: bytes, end: int) -> None:
        """The whole lines in data[:end]. Lines are grouped by length (64-byte buckets: free to compute, and rows
        with one key set mostly share one); the typed decode of each group verifies the guess. A bucket that fails
        is split by a hash of its lines' keys, and only a group that still fails is read line by line."""
        starts, stops = _line_bounds(data, end)
        base = self.lines
        self.lines += len(stops)
        self.columns.extend(self.lines)
        view = memoryview(data)
        for bucket, positions in _groups((stops - starts) >> 6):
            first = data[starts[positions[0]]:stops[positions[0]]]
            text = _runs_text(view, starts, stops, positions)
            if self._add_typed_group(("length", bucket), positions + base, text, first):
                continue
            lines = [data[i:j] for i, j in zip(starts[positions].tolist(), stops[positions].tolist())]
            for keys_hash, sub in _groups(_key_signatures(lines)):
                sub_lines = [lines[i] for i in sub.tolist()]
                if not self._add_typed_group(("keys", keys_hash), positions[sub] + base, b"\n".join(sub_lines),
                                             sub_lines[0]):
                    self._add_generic(positions[sub] + base, sub_lines)

    def add_tail(self, line: bytes) -> None:
        """The unterminated last line: a row if it decodes, otherwise a torn write (counted, not reported)."""
        self.lines += 1
        self.columns.extend(self.lines)
        self._add_generic(np.array([self.lines - 1]), [line], is_tail=True)

    def _group_decoder(self, signature: tuple[str, int], first_line: bytes) -> _GroupDecoder | None:
        known = self._by_signature.get(signature)
        if known is not None:
            return known
        try:
            keys = _canonical_keys(_decoder.decode(first_line))
        except msgspec.DecodeError:
            return None
        if keys is None:
            return None
        key_set = frozenset(keys)
        if key_set not in self._by_keys:
            self._by_keys[key_set] = _make_group_decoder(keys)
        self._by_signature[signature] = self._by_keys[key_set]
        return self._by_signature[signature]

    def _add_typed_group(self, signature: tuple[str, int], index: np.ndarray, text: bytes | memoryview,
                         first_line: bytes) -> bool:
        """The fast path: `text` holds the lines at `index`, one per line. False (nothing written) when any line
        does not fit the typed decoder learnt from the first line seen with this signature."""
        group_decoder = self._group_decoder(signature, first_line)
        if group_decoder is None:
            return False
        width = len(group_decoder.keys)
        try:
            records = group_decoder.decoder.decode_lines(text)
            if len(records) != len(index):  # a line holding two rows, or a blank line
                raise ValueError("row count differs from line count")
            # numpy parses the "NaN"/"Infinity"/"-Infinity" strings itself.
            flat = np.fromiter(chain.from_iterable(map(astuple, records)), np.float64, len(records) * width)
        except (msgspec.DecodeError, ValueError):
            del self._by_signature[signature]  # learn the signature again from the next group that has it
            return False
        del records
        values = flat.reshape(len(index), width)
        positions = values[:, :2] if group_decoder.has_attempt else values[:, :1]
        if np.abs(positions).max() >= _EXACT_INT_LIMIT:
            return False  # such steps would not survive float64; the generic path keeps them exact
        steps = positions[:, 0].astype(np.int64)
        attempts = positions[:, 1].astype(np.int64) if group_decoder.has_attempt else np.zeros(len(steps), np.int64)
        self.columns.put_rows(index, steps, attempts)
        self._note_first_rows(index, steps, attempts)
        first_metric = 2 if group_decoder.has_attempt else 1
        for column, key in enumerate(group_decoder.keys[first_metric:], first_metric):
            self.columns.put_metric(key, index, values[:, column])
        return True

    def _note_first_rows(self, index: np.ndarray, steps: np.ndarray, attempts: np.ndarray) -> None:
        if attempts[0] == attempts.min() == attempts.max():
            candidates: Iterable[tuple[int, int]] = [(int(attempts[0]), 0)]
        else:
            unique, first = np.unique(attempts, return_index=True)
            candidates = zip(unique.tolist(), first.tolist())
        for attempt, position in candidates:
            self._note_first(attempt, int(index[position]), int(steps[position]))

    def _note_first(self, attempt: int, line_index: int, step: int) -> None:
        known = self.first_row.get(attempt)
        if known is None or line_index < known[0]:
            self.first_row[attempt] = (line_index, step)

    def _add_generic(self, index: np.ndarray, group: list[bytes], is_tail: bool = False) -> None:
        """Line by line: any valid row, events, and a reason for every line that is not one."""
        by_keys: dict[tuple[str, ...], tuple[list[int], list[dict]]] = {}
        for line_index, line in zip(index.tolist(), group):
            if not line.strip():
                continue
            try:
                row = _decoder.decode(line)
            except msgspec.DecodeError as exc:
                if is_tail:
                    self.torn += 1
                else:
                    self.bad.append((line_index + 1, f"invalid JSON: {exc}"))
                continue
            problem = _row_problem(row) or _position_range_problem(row)
            if problem:
                self.bad.append((line_index + 1, problem))
                continue
            self._note_first(row.get("attempt", 0), line_index, row["step"])
            if "event" in row:
                self.events.append((line_index, _restore_non_finite(row)))
                continue
            indices, rows = by_keys.setdefault(tuple(row), ([], []))
            indices.append(line_index)
            rows.append(row)
        for keys, (indices, rows) in by_keys.items():
            rows_index = np.array(indices, dtype=np.int64)
            self.columns.put_rows(rows_index, [r["step"] for r in rows], [r.get("attempt", 0) for r in rows])
            for key in keys:
                if key not in _POSITION_KEYS:
                    numeric = _numeric_values([row[key] for row in rows])
                    if numeric is not None:
                        self.columns.put_metric(key, rows_index[numeric[1]], numeric[0])


def _position_range_problem(row: dict) -> str | None:
    for key in _POSITION_KEYS:
        value = row.get(key, 0)
        if not _INT64_MIN <= value <= _INT64_MAX:
            return f"{key!r} does not fit in int64: {value}"
    return None


def _as_number(value: object) -> float | None:
    if type(value) is str:
        return TOKEN_TO_FLOAT.get(value)
    try:
        return float(value) if type(value) in (float, int, bool) else None  # type: ignore[arg-type]
    except OverflowError:  # an integer beyond float64
        return None


def _numeric_values(values: list) -> tuple[np.ndarray, np.ndarray] | None:
    """(numeric values, mask of the rows that had one), or None when none did: text is left out of scalars."""
    if set(map(type, values)) <= {float, int}:
        try:
            return np.array(values, dtype=np.float64), np.ones(len(values), dtype=bool)
        except OverflowError:
            pass  # an integer beyond float64: value by value below
    numbers = [_as_number(value) for value in values]
    present = np.array([number is not None for number in numbers], dtype=bool)
    if not present.any():
        return None
    return np.array([number for number in numbers if number is not None], dtype=np.float64), present
