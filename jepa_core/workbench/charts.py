"""Altair charts of the metric stream for the notebooks (design §6, §7, §9): one builder per view.

Each builder draws frames shaped by jepa_core.workbench.chart_data (which metric goes in which chart is
jepa_core.metrics.registry's), so every dataset it embeds is bounded (``ROWS_PER_DATASET``) and no chart trips
Altair's 5,000-row default or marimo's output caps however long the run is. This module stays the notebooks' one
import for charts: ``__all__`` also names the shaping functions and metric selections they and the tests use.
"""

from __future__ import annotations

import html
from typing import Any, Mapping

import altair as alt
import pandas as pd

from jepa_core.workbench.chart_data import (
    ALERT_TABLE_COLUMNS,
    DEFAULT_MAX_POINTS,
    EARLY_WARNING_SIGNALS,
    EVAL_METRICS,
    MAX_ALERT_MARKS,
    METRIC_GROUPS,
    ROWS_PER_DATASET,
    THROUGHPUT_METRICS,
    Signal,
    alert_table,
    alerts_for_signal,
    alerts_of,
    baseline_frame,
    bucket_minmax,
    bucket_minmax_indices,
    long_frame,
    metric_series,
    overlay_frame,
    present_metrics,
    scalars_of,
    shaped_series,
    smooth_ema,
)

__all__ = [
    # drawn here
    "BRANCH_METRICS", "SEVERITY_COLOURS", "SHOW_POINTS_BELOW", "branch_chart", "chart_dataset_sizes",
    "early_warning_charts", "eval_chart",
    "group_chart", "metric_chart", "overlay_chart", "safe_text", "throughput_chart",
    # shaped in chart_data, offered here as before the split
    "ALERT_TABLE_COLUMNS", "DEFAULT_MAX_POINTS", "EARLY_WARNING_SIGNALS", "EVAL_METRICS", "MAX_ALERT_MARKS",
    "METRIC_GROUPS", "ROWS_PER_DATASET", "THROUGHPUT_METRICS", "Signal", "alert_table", "alerts_for_signal",
    "alerts_of", "baseline_frame", "bucket_minmax", "bucket_minmax_indices", "long_frame", "metric_series",
    "overlay_frame", "present_metrics", "scalars_of", "shaped_series", "smooth_ema",
]

SHOW_POINTS_BELOW = 60  # series this short get point marks on their line
SEVERITY_COLOURS = {"info": "#4c78a8", "warning": "#f58518", "critical": "#e45756"}


def safe_text(value: Any) -> str:
    """A string from a file, escaped for interpolation into HTML (for `mo.md` use jepa_core.workbench.markup.md_text,
    which also keeps markdown from reading it)."""
    return html.escape(str(value), quote=True)


# ---------------------------------------------------------------- chart builders


def _empty_chart(title: str, note: str = "no data logged yet") -> alt.Chart:
    return alt.Chart(pd.DataFrame({"note": [note]}), title=title).mark_text(
        color="gray").encode(text="note:N").properties(width=260, height=60)


# Axis numbers with their significant digits only: a flat series (one evaluation, a constant weight decay) would
# otherwise read "0.100000" or "64.000000".
AXIS_FORMAT = "~g"


def _line_layers(frame: pd.DataFrame, colour_field: str | None, title: str, width: int, height: int,
                 y_title: str = "value", colours: alt.Scale | None = None) -> alt.LayerChart:
    """A faint raw line under a solid smoothed line, sharing one dataset."""
    base = alt.Chart(frame, title=title).encode(
        x=alt.X("step:Q", title="step"),
        tooltip=[alt.Tooltip(c) for c in frame.columns],
    )
    colour = (alt.Color(f"{colour_field}:N", scale=colours or alt.Undefined) if colour_field
              else alt.value("#4c78a8"))
    raw = base.mark_line(opacity=0.3, strokeWidth=1).encode(
        y=alt.Y("value:Q", title=y_title, scale=alt.Scale(zero=False), axis=alt.Axis(format=AXIS_FORMAT)),
        color=colour)
    # A young run has a handful of points: draw them, or a single point would show nothing at all.
    group_field = colour_field or ("metric" if "metric" in frame.columns else None)
    longest = int(frame.groupby(group_field).size().max()) if group_field else len(frame)
    smooth = base.mark_line(strokeWidth=2, point=longest <= SHOW_POINTS_BELOW).encode(
        y="smoothed:Q", color=colour)
    return alt.layer(raw, smooth).properties(width=width, height=height)


def _alert_rules(alerts: pd.DataFrame) -> alt.Chart:
    frame = pd.DataFrame({
        "step": pd.to_numeric(alerts["step"], errors="coerce"),
        "severity": alerts.get("severity", pd.Series("warning", index=alerts.index)).astype(str),
        "rule": alerts.get("rule", pd.Series("", index=alerts.index)).astype(str),
        "message": alerts.get("message", pd.Series("", index=alerts.index)).astype(str),
    })
    return alt.Chart(frame).mark_rule(strokeDash=[4, 2], strokeWidth=2).encode(
        x="step:Q",
        color=alt.Color("severity:N", scale=alt.Scale(domain=list(SEVERITY_COLOURS),
                                                       range=list(SEVERITY_COLOURS.values())),
                        legend=alt.Legend(title="alert")),
        tooltip=["step:Q", "severity:N", "rule:N", "message:N"],
    )


def group_chart(table: Any, group: str, smoothing: float = 0.6,
                max_points: int = DEFAULT_MAX_POINTS) -> alt.TopLevelMixin:
    """Small multiples of one §6 group: one panel per logged metric, raw and smoothed lines."""
    if group not in METRIC_GROUPS:
        raise KeyError(f"unknown metric group {group!r}; known: {', '.join(METRIC_GROUPS)}")
    scalars = scalars_of(table)
    frame = long_frame(scalars, METRIC_GROUPS[group], smoothing, max_points)
    if frame.empty:
        return _empty_chart(group)
    layers = _line_layers(frame, None, "", width=220, height=130)
    return layers.facet(facet=alt.Facet("metric:N", title=None, sort=list(METRIC_GROUPS[group])),
                        columns=3, title=group).resolve_scale(y="independent")


def overlay_chart(tables: Mapping[str, Any], metric: str, smoothing: float = 0.6,
                  max_points: int = DEFAULT_MAX_POINTS) -> alt.TopLevelMixin:
    """One metric for several runs on one axis, coloured by run name."""
    frame = overlay_frame(tables, metric, smoothing, max_points)
    if frame.empty:
        return _empty_chart(metric, "no selected run logged this metric")
    return _line_layers(frame, "run", metric, width=600, height=260, y_title=metric)


# What a branch is compared with its parent on: the loss, the signals the rules watch most, the evaluation.
BRANCH_METRICS = ("loss", "pred_target/cosine", "target/std_mean", "target/effective_rank", "knn/accuracy",
                  "linear_probe/val_acc")


def branch_chart(parent: tuple[str, Any], branch: tuple[str, Any], branch_step: int, smoothing: float = 0.0,
                 max_points: int = DEFAULT_MAX_POINTS) -> alt.TopLevelMixin:
    """A branch (`jepa rewind`) over its parent, aligned by step, one panel per BRANCH_METRICS metric either logged;
    the branch point is a dashed vertical rule. Before it the two lines are one (the branch holds the parent's
    rows); after it they show what the change did."""
    tables = {f"parent: {parent[0]}": parent[1], f"branch: {branch[0]}": branch[1]}
    colours = alt.Scale(domain=list(tables), range=["#9d9d9d", "#4c78a8"])  # the parent grey, the branch in colour
    point = alt.Chart(pd.DataFrame({"step": [branch_step]})).mark_rule(strokeDash=[4, 3], color="black").encode(
        x="step:Q", tooltip=[alt.Tooltip("step:Q", title="branch point")])
    panels = []
    for metric in BRANCH_METRICS:
        frame = overlay_frame(tables, metric, smoothing, max_points)
        if frame.empty:
            continue
        lines = _line_layers(frame, "run", metric, width=220, height=130, y_title=metric, colours=colours)
        panels.append(alt.layer(lines, point).properties(width=220, height=130))
    if not panels:
        return _empty_chart("branch and parent", "neither run logged these metrics yet")
    return _grid(panels, f"branched at step {branch_step} (dashed rule)").configure_legend(orient="top")


def metric_chart(scalars: pd.DataFrame, metric: str, alerts: pd.DataFrame, smoothing: float,
                 max_points: int, width: int = 260, height: int = 140) -> alt.TopLevelMixin:
    """One metric with its alerts as dashed vertical rules coloured by severity."""
    frame = long_frame(scalars, [metric], smoothing, max_points)
    if frame.empty:
        return _empty_chart(metric)
    lines = _line_layers(frame, None, metric, width=width, height=height)
    if alerts.empty:
        return lines
    return alt.layer(lines, _alert_rules(alerts)).properties(width=width, height=height)


def early_warning_charts(table: Any, alerts: pd.DataFrame | None = None, smoothing: float = 0.0,
                         max_points: int = DEFAULT_MAX_POINTS) -> alt.TopLevelMixin:
    """The six §7 signals, one row each, with the alerts that concern them marked on the x axis."""
    scalars = scalars_of(table)
    all_alerts = alerts_of(table) if alerts is None else alerts
    rows = []
    for signal in EARLY_WARNING_SIGNALS:
        marks = alerts_for_signal(all_alerts, signal)
        names = present_metrics(scalars, signal.metrics)
        if not names:
            rows.append(_empty_chart(signal.title))
            continue
        panels = [metric_chart(scalars, m, marks, smoothing, max_points) for m in names]
        if signal.key == "eval":  # what eval_regression compares with: the random-init reading, dashed
            baseline = baseline_frame(scalars)
            panels = [_with_baseline(panel, baseline, m) for panel, m in zip(panels, names)]
        rows.append(_grid(panels, signal.title))
    return alt.vconcat(*rows).resolve_scale(color="independent")


PANELS_PER_ROW = 3  # 3 x 260 px fits the notebooks' "medium" width; a fourth panel in the row was cut off


def _grid(panels: list[alt.TopLevelMixin], title: str) -> alt.TopLevelMixin:
    """Panels PANELS_PER_ROW to a row, under one title."""
    if len(panels) <= PANELS_PER_ROW:
        return alt.hconcat(*panels, title=title)
    rows = [alt.hconcat(*panels[i:i + PANELS_PER_ROW]) for i in range(0, len(panels), PANELS_PER_ROW)]
    return alt.vconcat(*rows, title=title)


def _with_baseline(panel: alt.TopLevelMixin, baseline: pd.DataFrame, metric: str) -> alt.TopLevelMixin:
    """`panel` with `metric`'s step-0 (random-init) reading (from `baseline_frame`) as a dashed grey rule."""
    baseline = baseline[baseline["metric"] == metric]
    if baseline.empty:
        return panel
    rule = alt.Chart(baseline).mark_rule(strokeDash=[6, 4], color="gray").encode(
        y="baseline:Q", tooltip=[alt.Tooltip("baseline:Q", title="random init")])
    return alt.layer(panel, rule)


def eval_chart(table: Any, max_points: int = DEFAULT_MAX_POINTS) -> alt.TopLevelMixin:
    """Evaluation curves with each metric's step-0 (random-init) value as a dashed baseline."""
    scalars = scalars_of(table)
    frame = long_frame(scalars, EVAL_METRICS, 0.0, max_points)
    if frame.empty:
        return _empty_chart("evaluation", "no evaluation logged yet")
    base = alt.Chart(frame, title="evaluation (dashed: random-init baseline at step 0)")
    lines = base.mark_line(point=True).encode(
        x=alt.X("step:Q"), y=alt.Y("value:Q", title="accuracy"), color="metric:N",
        tooltip=["metric:N", "step:Q", "value:Q"])
    baseline = baseline_frame(scalars)
    if baseline.empty:
        return lines.properties(width=600, height=260)
    rules = alt.Chart(baseline).mark_rule(strokeDash=[6, 4]).encode(
        y="baseline:Q", color="metric:N", tooltip=["metric:N", "baseline:Q"])
    return alt.layer(lines, rules).properties(width=600, height=260)


def throughput_chart(table: Any, smoothing: float = 0.6,
                     max_points: int = DEFAULT_MAX_POINTS) -> alt.TopLevelMixin:
    """Samples per second and step/data time, side by side."""
    scalars = scalars_of(table)
    frame = long_frame(scalars, THROUGHPUT_METRICS, smoothing, max_points)
    if frame.empty:
        return _empty_chart("throughput")
    layers = _line_layers(frame, None, "", width=260, height=140)
    return layers.facet(facet=alt.Facet("metric:N", title=None), columns=3,
                        title="throughput").resolve_scale(y="independent")


def chart_dataset_sizes(chart: alt.TopLevelMixin) -> list[int]:
    """Row counts of every dataset a chart embeds (used by tests and as a guard)."""
    spec = chart.to_dict()
    return [len(values) for values in spec.get("datasets", {}).values()]
