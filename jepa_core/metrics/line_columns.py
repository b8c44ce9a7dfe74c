"""The columns `jepa_core.metrics.line_scan` decodes metrics.jsonl into, indexed by line number.

Both decode paths (typed groups and line by line) write their values in place at the lines they came from, so the
table needs no reordering or concatenation afterwards; `jepa_core.metrics.reader` then keeps the rows the resume
purge leaves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

__all__ = ["LineColumns"]


def _regrown(array: np.ndarray, capacity: int, used: int) -> np.ndarray:
    grown = np.empty(capacity, dtype=array.dtype)
    grown[:used] = array[:used]
    return grown


class LineColumns:
    """Columns indexed by 0-based line number: step, attempt, is-a-metric-row, and one NaN-filled float64 column
    per metric key. Both decode paths write in place, so nothing is reordered or concatenated afterwards.

    Capacity comes from an estimate of the line count, but only the lines read so far are ever initialised
    (`extend`): the pages past them are never touched, so an estimate that is too high costs address space, not
    memory."""

    def __init__(self) -> None:
        self.capacity = self.used = 0
        self.step = np.empty(0, np.int64)
        self.attempt = np.empty(0, np.int64)
        self.is_metric = np.empty(0, bool)
        self.metrics: dict[str, np.ndarray] = {}
        # metric key -> the first line holding it: the table's column order, the same however the file was cut
        # into blocks (a live follower feeds it a poll at a time, `read_metrics` a few MB at a time)
        self.first_line: dict[str, int] = {}

    def grow(self, capacity: int) -> None:
        if capacity > self.capacity:
            self.step = _regrown(self.step, capacity, self.used)
            self.attempt = _regrown(self.attempt, capacity, self.used)
            self.is_metric = _regrown(self.is_metric, capacity, self.used)
            self.metrics = {key: _regrown(column, capacity, self.used) for key, column in self.metrics.items()}
            self.capacity = capacity

    def extend(self, lines: int) -> None:
        """Make lines [used, lines) writable and blank: not a metric row, NaN in every metric column."""
        if lines > self.capacity:
            self.grow(max(lines, self.capacity * 3 // 2 + 1024))
        new = slice(self.used, lines)
        self.step[new], self.attempt[new], self.is_metric[new] = 0, 0, False
        for column in self.metrics.values():
            column[new] = math.nan
        self.used = max(self.used, lines)

    def put_rows(self, index: np.ndarray, steps: Iterable[int], attempts: Iterable[int]) -> None:
        self.step[index], self.attempt[index], self.is_metric[index] = steps, attempts, True

    def put_metric(self, key: str, index: np.ndarray, values: np.ndarray) -> None:
        """`values` at the lines `index` (ascending, as both decode paths pass them) of `key`'s column."""
        column = self.metrics.get(key)
        if column is None:
            column = self.metrics[key] = np.empty(self.capacity)
            column[: self.used] = math.nan
        column[index] = values
        first = int(index[0])
        if first < self.first_line.get(key, first + 1):
            self.first_line[key] = first

    def keys_in_file_order(self) -> list[str]:
        """Metric keys by the first line that holds each (ties: in the order they were put, i.e. the row's)."""
        return sorted(self.metrics, key=self.first_line.__getitem__)
