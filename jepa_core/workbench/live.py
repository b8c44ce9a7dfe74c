"""`LiveRun`: one run kept up to date for the notebooks, reading only the bytes appended since the last poll."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from jepa_core.metrics.stream import ALERT_COLUMNS, STREAM_NAME, stream_file
from jepa_core.run.status import LIVE
from jepa_core.workbench.runs import load_run_table, run_info



@dataclass(frozen=True)
class LiveTable:
    """The MetricsTable shape (scalars, alerts) built incrementally from followed rows.

    Frozen and replaced as a whole by each poll, so a reader on another thread that takes `live.table` once holds a
    consistent pair of frames.
    """

    scalars: pd.DataFrame
    alerts: pd.DataFrame

    @property
    def last_step(self) -> int | None:
        return int(self.scalars["step"].max()) if len(self.scalars) else None


class LiveRun:
    """One run for the monitor and the workbench: an ended run is read once; a live one is followed.

    Following reads only the bytes appended since the last poll (jepa_core.metrics.follower.MetricsFollower), appends them
    to the frames, and re-applies the resume purge when a newer attempt starts.
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
            self.table = LiveTable(_empty_scalars(), _empty_alerts())
            self.poll()
        else:
            table, self.problems = load_run_table(self.path)
            self.table = LiveTable(table.scalars, table.alerts)

    @property
    def name(self) -> str:
        return self.path.name

    def poll(self) -> bool:
        """Read what was appended since the last poll; True when the table changed."""
        from jepa_core.metrics.stream import apply_resume_purge

        if self.follower is None:
            return False
        update = self.follower.poll_update()
        table = LiveTable(_empty_scalars(), _empty_alerts()) if update.reset else self.table
        if not update.rows:
            self.table = table
            return update.reset
        metric_rows = [r for r in update.rows if "event" not in r]
        alert_rows = [r for r in update.rows if r.get("event") == "alert"]
        scalars, alerts = table.scalars, table.alerts
        if metric_rows:
            new = pd.DataFrame(metric_rows)
            new = new.loc[:, [c for c in new.columns if new[c].dtype.kind in "iufb"]]
            scalars = pd.concat([scalars, new], ignore_index=True) if len(scalars) else new
        if alert_rows:
            new_alerts = pd.DataFrame([{**{c: r.get(c) for c in ALERT_COLUMNS}, "attempt": r.get("attempt", 0)}
                                       for r in alert_rows],
                                      columns=list(ALERT_COLUMNS))
            alerts = pd.concat([alerts, new_alerts], ignore_index=True) if len(alerts) else new_alerts
        if update.purge_from_step is not None:
            scalars = apply_resume_purge(scalars).reset_index(drop=True)
            if len(alerts):
                alerts = apply_resume_purge(alerts.astype({"attempt": "int64"})).reset_index(drop=True)
        if "attempt" not in scalars.columns:
            scalars.insert(1, "attempt", 0)
        self.table = LiveTable(scalars, alerts)
        return True


def _empty_scalars() -> pd.DataFrame:
    return pd.DataFrame({"step": np.array([], dtype=np.int64), "attempt": np.array([], dtype=np.int64)})


def _empty_alerts() -> pd.DataFrame:
    return pd.DataFrame(columns=list(ALERT_COLUMNS))
