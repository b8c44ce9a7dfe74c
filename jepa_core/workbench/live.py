"""`LiveRun`: one run kept up to date for the notebooks, reading only the bytes appended since the last poll.

A live run's table is read by the same row reader as a one-shot `read_metrics`: the follower
(jepa_core.metrics.follower) hands over the complete lines appended since the last poll, they go into one
`jepa_core.metrics.line_scan.Scan` kept for the run, and `jepa_core.metrics.reader.scan_table` builds the frames from
it (resume purge, columns and dtypes included). So after any poll the table equals `read_metrics` of the file, save
an unterminated last line: the follower holds it back until its "\\n" arrives, where a one-shot read keeps it as a
row if it decodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from jepa_core.metrics.line_scan import Scan
from jepa_core.metrics.reader import MetricsTable, scan_table
from jepa_core.metrics.stream import STREAM_NAME, stream_file
from jepa_core.run.status import LIVE
from jepa_core.workbench.runs import load_run_table, run_info


@dataclass(frozen=True)
class LiveTable:
    """The MetricsTable frames the notebooks chart (scalars, alerts), for a followed or a read-once run.

    Frozen and replaced as a whole by each poll, so a reader on another thread that takes `live.table` once holds a
    consistent pair of frames.
    """

    scalars: pd.DataFrame
    alerts: pd.DataFrame

    @classmethod
    def of(cls, table: MetricsTable) -> LiveTable:
        return cls(table.scalars, table.alerts)

    @property
    def last_step(self) -> int | None:
        return int(self.scalars["step"].max()) if len(self.scalars) else None


class LiveRun:
    """One run for the monitor and the workbench: an ended run is read once; a live one is followed.

    Following reads only the bytes appended since the last poll (jepa_core.metrics.follower.MetricsFollower) and
    decodes only those into the run's `Scan`; the frames are rebuilt from the scan when it gained a row, with the
    resume purge applied afresh (a newer attempt drops the older attempts' rows and alerts from its first step on).
    """

    def __init__(self, path: str | Path) -> None:
        from jepa_core.metrics.follower import MetricsFollower

        self.path = Path(path)
        self.metrics_path = stream_file(self.path)  # an archived run's metrics.jsonl.gz is read once, never followed
        self.follower: MetricsFollower | None = None
        self.problems: list[str] = []  # a stream read once that could not be read (all of it) says so here
        info = run_info(self.path)
        if self.metrics_path.name == STREAM_NAME and (info.status in LIVE or not self.metrics_path.is_file()):
            self.follower = MetricsFollower(self.metrics_path)
            self.scan = Scan()  # every complete line followed so far, decoded
            self.table = LiveTable.of(scan_table(self.scan))
            self.poll()
        else:
            table, self.problems = load_run_table(self.path)
            self.table = LiveTable.of(table)

    @property
    def name(self) -> str:
        return self.path.name

    def poll(self) -> bool:
        """Read what was appended since the last poll; True when the table changed (a row, or the file replaced)."""
        if self.follower is None:
            return False
        appended = self.follower.poll_bytes()
        if appended.reset:  # truncated or replaced: what was read before is gone
            self.scan = Scan()
        grew = bool(appended.data) and self._add(appended.data)
        if grew or appended.reset:
            self.table = LiveTable.of(scan_table(self.scan))
        return grew or appended.reset

    def _add(self, data: bytes) -> bool:
        """Decode complete lines into the scan; True when any of them was a row (blank and bad lines are not)."""
        scan = self.scan
        first, events = scan.lines, len(scan.events)
        scan.add_block(data, len(data))
        return len(scan.events) > events or bool(scan.columns.is_metric[first:scan.lines].any())
