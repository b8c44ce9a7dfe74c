"""Reading metrics.jsonl into columnar frames (design §5): `read_metrics`, `scan_table` and `MetricsTable`.

There is one row reader. `read_metrics` feeds the file block by block to a `jepa_core.metrics.line_scan.Scan` (the
fast decode: per-line columns, events and bad lines); a live run (jepa_core.workbench.live) feeds its `Scan` the
complete lines appended since its last poll (jepa_core.metrics.follower). Either way `scan_table` applies the resume
purge and builds the frames, so a followed table and a one-shot read of the same file are equal frames (once its
last line is complete: a follower holds an unterminated line back, a one-shot read keeps it if it decodes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path

import numpy as np
import pandas as pd

from jepa_core.metrics.line_scan import Scan
from jepa_core.metrics.stream import ALERT_COLUMNS, READ_CHUNK_BYTES, _blocks, _keep_mask, _purge_thresholds

__all__ = ["MetricsTable", "read_metrics", "scan_table"]


@dataclass
class MetricsTable:
    scalars: pd.DataFrame  # step, attempt (int64), then one float64 column per numeric metric
    alerts: pd.DataFrame  # step, attempt, rule, severity, metric, value, message
    events: pd.DataFrame  # step, attempt, event, plus the events' own fields
    torn_lines: int = 0  # every skipped line, torn tail included
    bad_lines: list[tuple[int, str]] = field(default_factory=list)  # skipped lines that were not the torn tail


def read_metrics(path: str | os.PathLike, chunk_bytes: int = READ_CHUNK_BYTES) -> MetricsTable:
    """Read a metrics.jsonl into columnar frames, resume purge applied, skipping (and reporting) bad lines.

    Memory stays bounded by reading `chunk_bytes` at a time into columns sized from the first block's line
    density; per-value work happens in C (msgspec, numpy).
    """
    path = Path(path)
    scan = Scan()
    size = path.stat().st_size
    # The garbage collector stays as the caller set it: turning it off here (it was) changed the whole process,
    # a marimo kernel with a training thread included, and measured no faster (6.5 MB: 0.021 s either way).
    for data, end in _blocks(path, chunk_bytes):
        if end < 0:
            scan.add_tail(data)
            continue
        if scan.lines == 0:  # size the columns from the first block's line density
            scan.columns.grow(int(size * data.count(b"\n", 0, end) / end * 1.1) + 64)
        scan.add_block(data, end)
        del data  # free this block before reading the next one
    return scan_table(scan, consume=True)


def scan_table(scan: Scan, consume: bool = False) -> MetricsTable:
    """The scan's rows and events that the resume purge keeps, as frames: the one place rows become a table.

    scalars: step, attempt (int64), then one float64 column per metric with a numeric value (ints and bools
    included; text is left out), in the order of the line that first holds each. The frames are copies: the scan
    may go on reading. `consume` frees each of the scan's per-line buffers as it is copied (a one-shot read is done
    with its scan; a live one is not)."""
    lines, columns = scan.lines, scan.columns
    thresholds = _purge_thresholds({attempt: step for attempt, (_, step) in scan.first_row.items()})
    steps, attempts = columns.step[:lines], columns.attempt[:lines]
    keep = columns.is_metric[:lines] & _keep_mask(steps, attempts, thresholds)
    scalars = {"step": steps[keep], "attempt": attempts[keep]}  # boolean indexing copies
    for key in columns.keys_in_file_order():
        column = columns.metrics.pop(key) if consume else columns.metrics[key]
        scalars[key] = column[:lines][keep]  # consumed: each per-line buffer is freed as we go
    kept_events = [row for _, row in sorted(scan.events, key=itemgetter(0))
                   if row["step"] < thresholds[row.get("attempt", 0)]]
    return MetricsTable(
        scalars=pd.DataFrame(scalars, copy=False),  # copy=False: one block per column, no consolidation copy
        alerts=_alerts_frame([r for r in kept_events if r["event"] == "alert"]),
        events=_events_frame([r for r in kept_events if r["event"] != "alert"]),
        torn_lines=scan.torn + len(scan.bad),
        bad_lines=sorted(scan.bad),
    )


def _alerts_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame([{c: r.get(c) for c in ALERT_COLUMNS} for r in rows], columns=list(ALERT_COLUMNS))
    frame["attempt"] = frame["attempt"].fillna(0)
    return frame.astype({"step": np.int64, "attempt": np.int64, "value": np.float64})


def _events_frame(rows: list[dict]) -> pd.DataFrame:
    lead = ["step", "attempt", "event"]
    if not rows:
        return pd.DataFrame({"step": pd.Series(dtype=np.int64), "attempt": pd.Series(dtype=np.int64),
                             "event": pd.Series(dtype=object)})
    frame = pd.DataFrame([{"attempt": 0, **r} for r in rows])
    frame = frame[lead + [c for c in frame.columns if c not in lead]]
    return frame.astype({"step": np.int64, "attempt": np.int64})
