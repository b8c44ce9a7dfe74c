"""What the notebooks' charts plot, as data (design §6, §7, §9): no drawing here, so all of it is unit-tested.

Which metrics each view plots (the §6 groups, the §7 early-warning signals, evaluation, throughput) is
jepa_core.metrics.registry's; this module turns a MetricsTable into what a chart embeds: TensorBoard's debiased EMA
smoothing, min/max bucketing (spikes survive downsampling), long-form frames of one run or of several runs overlaid,
each bounded to ``ROWS_PER_DATASET`` rows, the step-0 evaluation baseline, and the alerts that belong on each panel
or in the alert table. jepa_core.workbench.charts draws these frames with Altair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from jepa_core.metrics import registry
from jepa_core.metrics.stream import ALERT_COLUMNS

# Below Altair's default max_rows (5,000), so charts render anywhere without disabling the guard.
ROWS_PER_DATASET = 4500
DEFAULT_MAX_POINTS = 1000
# A run rarely has more alerts than this; beyond it the alert table is the place to read them.
MAX_ALERT_MARKS = 200

# §6 metric groups, in display order, as the metric registry places them. "Run facts" are shown in run summaries,
# not charted.
METRIC_GROUPS: dict[str, tuple[str, ...]] = {panel: registry.shown_in("group", panel)
                                             for panel in registry.panels("group")}
EVAL_METRICS = registry.shown_in("eval")
THROUGHPUT_METRICS = registry.shown_in("throughput")
# The alert table shows the stream's alert columns (design §5) with the severity first and without the attempt.
ALERT_TABLE_COLUMNS = ("step", "severity", *(c for c in ALERT_COLUMNS if c not in ("step", "attempt", "severity")))


@dataclass(frozen=True)
class Signal:
    """One early-warning panel: the metrics it plots and the alert rules that belong on it."""

    key: str
    title: str
    metrics: tuple[str, ...]
    # An alert lands on this panel when its metric is one of `metrics` or its rule name
    # contains one of these words (rule names are owned by jepa_core.alerts.rules: mask_leak,
    # target_gradients, non_finite, variance_collapse, steady_collapse, online_collapse, rank_collapse,
    # ema_stalled, ema_runaway, false_comfort, divergence, predictor_collapse, eval_regression).
    rule_words: tuple[str, ...]


def _signal(key: str, title: str, rule_words: tuple[str, ...]) -> Signal:
    """A panel of the early-warning view; which metrics it plots, in which order, is the registry's."""
    return Signal(key, title, registry.shown_in("signal", key), rule_words)


EARLY_WARNING_SIGNALS: tuple[Signal, ...] = (
    _signal("variance", "Variance collapse / false comfort", ("variance", "steady", "online", "comfort",
                                                                         "predictor")),
    _signal("eval", "Worse than random init (kNN, probe)", ("eval",)),
    _signal("rank", "Rank collapse", ("rank",)),
    _signal("leak", "Mask leak / target gradients", ("leak", "target_grad")),
    _signal("ema", "EMA stalled / runaway", ("ema",)),
    _signal("divergence", "Divergence / non-finite", ("diverg", "finite")),
)


# ---------------------------------------------------------------- smoothing and bucketing


def smooth_ema(values: Iterable[float], weight: float) -> np.ndarray:
    """TensorBoard's debiased exponential moving average.

    last = last * w + (1 - w) * v, divided by 1 - w**n (n = finite values seen so far) so the
    first points are not pulled toward zero. Non-finite values pass through unchanged and do not
    enter the average, so a NaN stays visible where it happened.
    """
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight!r}")
    raw = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    finite = raw[np.isfinite(raw)]
    # Like TensorBoard, leave a constant series alone: the EMA would only add rounding wiggles.
    if weight == 0.0 or finite.size == 0 or np.all(finite == finite[0]):
        return raw.copy()
    out = np.empty_like(raw)
    last = 0.0
    count = 0
    # A plain loop over Python floats: ~0.3 s per million points, clearer than a blocked scan.
    for i, v in enumerate(raw.tolist()):
        if not math.isfinite(v):
            out[i] = v
            continue
        last = last * weight + (1.0 - weight) * v
        count += 1
        out[i] = last / (1.0 - weight**count)
    return out


def bucket_minmax_indices(values: np.ndarray, max_points: int) -> np.ndarray:
    """Indices to keep so that each contiguous bucket contributes its minimum and its maximum.

    At most `max_points` indices, sorted. A bucket holding a NaN keeps its first NaN in place of its
    minimum, so a non-finite value survives downsampling as surely as a spike does.
    """
    if max_points < 2:
        raise ValueError(f"max_points must be at least 2, got {max_points}")
    vals = np.asarray(values, dtype=float)
    n = vals.size
    if n <= max_points:
        return np.arange(n)
    per_bucket = math.ceil(n / (max_points // 2))
    n_buckets = math.ceil(n / per_bucket)
    is_nan = np.isnan(vals)
    # Padding never wins: argmin/argmax return the first extreme, and padding sits at the end.
    pad = n_buckets * per_bucket - n
    for_min = np.concatenate([np.where(is_nan, np.inf, vals), np.full(pad, np.inf)])
    for_max = np.concatenate([np.where(is_nan, -np.inf, vals), np.full(pad, -np.inf)])
    nan_pad = np.concatenate([is_nan, np.zeros(pad, dtype=bool)]).reshape(n_buckets, per_bucket)
    offsets = np.arange(n_buckets) * per_bucket
    i_min = for_min.reshape(n_buckets, per_bucket).argmin(axis=1) + offsets
    i_max = for_max.reshape(n_buckets, per_bucket).argmax(axis=1) + offsets
    has_nan = nan_pad.any(axis=1)
    i_min = np.where(has_nan, nan_pad.argmax(axis=1) + offsets, i_min)
    keep = np.unique(np.concatenate([i_min, i_max]))
    return keep[keep < n]


def bucket_minmax(steps: Iterable[float], values: Iterable[float],
                  max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Downsample one series to at most `max_points` points, keeping each bucket's min and max."""
    s = np.asarray(list(steps) if not isinstance(steps, np.ndarray) else steps)
    v = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    if s.shape != v.shape:
        raise ValueError(f"steps and values differ in length: {s.shape} vs {v.shape}")
    keep = bucket_minmax_indices(v, max_points)
    return s[keep], v[keep]


# ---------------------------------------------------------------- frames


def scalars_of(table: Any) -> pd.DataFrame:
    """The scalar frame of a MetricsTable (jepa_core.metrics.stream), or a DataFrame passed as is."""
    frame = table if isinstance(table, pd.DataFrame) else getattr(table, "scalars", None)
    if not isinstance(frame, pd.DataFrame) or "step" not in frame.columns:
        raise TypeError("expected a MetricsTable or a DataFrame with a 'step' column")
    return frame


def metric_series(scalars: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rows where `metric` was logged, as (step, value) sorted by step; empty if never logged."""
    if metric not in scalars.columns:
        return pd.DataFrame({"step": np.array([], dtype=np.int64), "value": np.array([], dtype=float)})
    sub = scalars.loc[scalars[metric].notna(), ["step", metric]]
    sub = sub.rename(columns={metric: "value"}).sort_values("step", kind="stable")
    return sub.reset_index(drop=True)


def shaped_series(scalars: pd.DataFrame, metric: str, smoothing: float,
                  max_points: int) -> pd.DataFrame:
    """One metric smoothed at full resolution, then min/max bucketed: columns step, value, smoothed."""
    series = metric_series(scalars, metric)
    values = series["value"].to_numpy(dtype=float)
    smoothed = smooth_ema(values, smoothing)
    keep = bucket_minmax_indices(values, max_points)
    return pd.DataFrame({
        "step": series["step"].to_numpy()[keep],
        "value": _json_safe(values[keep]),
        "smoothed": _json_safe(smoothed[keep]),
    })


def _json_safe(values: np.ndarray) -> np.ndarray:
    # Vega-Lite cannot draw inf; it breaks the line at null, which is where NaN/inf end up.
    return np.where(np.isfinite(values), values, np.nan)


def present_metrics(scalars: pd.DataFrame, metrics: Iterable[str]) -> list[str]:
    """The metrics from `metrics` that have at least one logged value."""
    return [m for m in metrics if m in scalars.columns and scalars[m].notna().any()]


def long_frame(scalars: pd.DataFrame, metrics: Iterable[str], smoothing: float = 0.0,
               max_points: int = DEFAULT_MAX_POINTS, row_budget: int = ROWS_PER_DATASET) -> pd.DataFrame:
    """Long-form frame (step, metric, value, smoothed) for Altair, at most `row_budget` rows.

    Each series gets min(max_points, row_budget // number_of_series) points.
    """
    names = present_metrics(scalars, metrics)
    if not names:
        return pd.DataFrame(columns=["step", "metric", "value", "smoothed"])
    per_series = max(2, min(max_points, row_budget // len(names)))
    parts = []
    for name in names:
        part = shaped_series(scalars, name, smoothing, per_series)
        part.insert(1, "metric", name)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def overlay_frame(tables: Mapping[str, Any], metric: str, smoothing: float = 0.0,
                  max_points: int = DEFAULT_MAX_POINTS,
                  row_budget: int = ROWS_PER_DATASET) -> pd.DataFrame:
    """Long-form (run, step, value, smoothed) for one metric across runs, bounded to `row_budget`."""
    present = {n: scalars_of(t) for n, t in tables.items()}
    present = {n: s for n, s in present.items() if present_metrics(s, [metric])}
    if not present:
        return pd.DataFrame(columns=["run", "step", "value", "smoothed"])
    per_series = max(2, min(max_points, row_budget // len(present)))
    parts = []
    for name, scalars in present.items():
        part = shaped_series(scalars, metric, smoothing, per_series)
        part.insert(0, "run", str(name))
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def baseline_frame(scalars: pd.DataFrame) -> pd.DataFrame:
    """Evaluation values logged at step 0 (the random-init baseline): columns metric, baseline."""
    rows = []
    for metric in present_metrics(scalars, EVAL_METRICS):
        series = metric_series(scalars, metric)
        at_zero = series.loc[series["step"] == 0, "value"]
        if not at_zero.empty and math.isfinite(float(at_zero.iloc[-1])):
            rows.append({"metric": metric, "baseline": float(at_zero.iloc[-1])})
    return pd.DataFrame(rows, columns=["metric", "baseline"])


# ---------------------------------------------------------------- alerts


def alerts_of(table: Any) -> pd.DataFrame:
    """The alert frame of a MetricsTable, or an empty one with the §5 alert columns."""
    frame = getattr(table, "alerts", None)
    if isinstance(frame, pd.DataFrame):
        return frame
    return pd.DataFrame(columns=list(ALERT_COLUMNS))


def alerts_for_signal(alerts: pd.DataFrame, signal: Signal) -> pd.DataFrame:
    """Alert rows that belong on `signal`'s panel (by metric, else by rule name), capped in number."""
    if alerts.empty:
        return alerts
    metric = alerts.get("metric", pd.Series("", index=alerts.index)).fillna("").astype(str)
    rule = alerts.get("rule", pd.Series("", index=alerts.index)).fillna("").astype(str).str.lower()
    by_metric = metric.isin(signal.metrics)
    by_rule = rule.apply(lambda r: any(word in r for word in signal.rule_words))
    return alerts.loc[by_metric | by_rule].head(MAX_ALERT_MARKS)


def alert_table(table: Any) -> pd.DataFrame:
    """Alerts for display: step, severity, rule, metric, value, message (strings kept as text)."""
    alerts = alerts_of(table)
    cols = [c for c in ALERT_TABLE_COLUMNS if c in alerts.columns]
    shown = alerts.loc[:, cols].reset_index(drop=True)
    if "value" in shown.columns:  # four significant digits, as the messages print them (not 33.2762440582066100)
        shown["value"] = pd.to_numeric(shown["value"], errors="coerce").map(
            lambda v: float(f"{v:.4g}") if math.isfinite(v) else v)
    return shown

