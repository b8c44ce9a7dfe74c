"""A branch (`jepa rewind`) drawn over its parent: what the monitor, the report and the workbench show for one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jepa_core.workbench.charts import DEFAULT_MAX_POINTS, branch_chart
from jepa_core.workbench.runs import branch_of, load_run_table


def branch_view(path: str | Path, name: str, table: Any, smoothing: float = 0.0,
                max_points: int = DEFAULT_MAX_POINTS) -> tuple[str, str, Any] | None:
    """(the parent's name, the branch step, the chart of the run at `path` over its parent), or None when the run
    is not a branch or its parent is gone. The parent is read once, as it is now."""
    found = branch_of(path)
    if found is None:
        return None
    parent, step = found
    parent_table, _ = load_run_table(parent)
    return parent.name, str(step), branch_chart((parent.name, parent_table), (name, table), step, smoothing,
                                                max_points)
