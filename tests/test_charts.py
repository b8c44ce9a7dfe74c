"""Data shaping and chart builders of jepa_core.workbench.charts: smoothing, bucketing, bounded chart data, escaping."""

from __future__ import annotations

import math
from types import SimpleNamespace

import altair as alt
import numpy as np
import pandas as pd
import pytest

from jepa_core.workbench import charts
from browser_util import XSS


def long_table(steps: int = 200_000, every: int = 1) -> SimpleNamespace:
    """A MetricsTable-shaped object with every charted metric logged densely (worst case for chart size)."""
    step = np.arange(0, steps, every)
    rng = np.random.default_rng(0)
    columns = {"step": step, "attempt": np.ones_like(step)}
    for group in charts.METRIC_GROUPS.values():
        for name in group:
            columns[name] = rng.normal(size=step.size)
    alerts = pd.DataFrame({"step": [5000, 9000, 12000], "attempt": [1, 1, 1],
                           "rule": ["variance_collapse", "rank_collapse", "mask_leak"],
                           "severity": ["warning", "critical", "critical"],
                           "metric": ["target/std_mean", "target/effective_rank", "mask/overlap_fraction"],
                           "value": [0.1, 2.0, 0.3], "message": [XSS, "rank fell", "leak"]})
    return SimpleNamespace(scalars=pd.DataFrame(columns), alerts=alerts)


def test_smooth_ema_matches_hand_computed_debiased_ema() -> None:
    # w = 0.5: last = 0.5, 1.25, 2.125; debias by 1 - 0.5**n = 0.5, 0.75, 0.875
    out = charts.smooth_ema([1.0, 2.0, 3.0], 0.5)
    np.testing.assert_allclose(out, [1.0, 1.25 / 0.75, 2.125 / 0.875])


def test_smooth_ema_passes_non_finite_through_without_poisoning_the_average() -> None:
    out = charts.smooth_ema([1.0, math.nan, 2.0, math.inf, 4.0], 0.5)
    assert math.isnan(out[1]) and out[3] == math.inf
    # NaN and inf are skipped: the third finite value sees only 1 and 2 before it.
    np.testing.assert_allclose(out[[0, 2, 4]], [1.0, 1.25 / 0.75, (0.625 + 2.0) / 0.875])


def test_smooth_ema_weight_zero_and_constant_series_are_unchanged() -> None:
    values = np.array([3.0, 1.0, 2.0])
    np.testing.assert_array_equal(charts.smooth_ema(values, 0.0), values)
    constant = np.full(50, 1e-3)
    np.testing.assert_array_equal(charts.smooth_ema(constant, 0.9), constant)


@pytest.mark.parametrize("weight", [-0.1, 1.0, 1.5])
def test_smooth_ema_rejects_weights_outside_unit_interval(weight: float) -> None:
    with pytest.raises(ValueError, match="smoothing weight"):
        charts.smooth_ema([1.0, 2.0], weight)


def test_bucket_minmax_keeps_a_single_spike_in_a_million_points() -> None:
    rng = np.random.default_rng(1)
    values = rng.normal(size=1_000_000)
    values[654_321] = 50.0
    values[123_457] = -50.0
    steps = np.arange(values.size)
    kept_steps, kept_values = charts.bucket_minmax(steps, values, 1000)
    assert len(kept_steps) <= 1000
    assert 654_321 in kept_steps and 123_457 in kept_steps
    assert kept_values.max() == 50.0 and kept_values.min() == -50.0
    assert np.all(np.diff(kept_steps) > 0)


def test_bucket_minmax_keeps_nan_and_short_series_whole() -> None:
    values = np.arange(10_000, dtype=float)
    values[4321] = math.nan
    keep = charts.bucket_minmax_indices(values, 100)
    assert len(keep) <= 100 and 4321 in keep
    np.testing.assert_array_equal(charts.bucket_minmax_indices(np.ones(7), 100), np.arange(7))


def test_bucket_minmax_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_points"):
        charts.bucket_minmax_indices(np.ones(10), 1)
    with pytest.raises(ValueError, match="differ in length"):
        charts.bucket_minmax([1, 2, 3], [1.0, 2.0], 10)


def test_long_frame_stays_within_row_budget_for_many_long_series() -> None:
    table = long_table(50_000)
    frame = charts.long_frame(table.scalars, charts.METRIC_GROUPS["target representation"], 0.6, 2000)
    assert len(frame) <= charts.ROWS_PER_DATASET
    assert set(frame["metric"]) == set(charts.METRIC_GROUPS["target representation"])


def test_every_chart_keeps_each_dataset_under_altairs_default_limit() -> None:
    table = long_table(60_000)  # 60,000 points per series, far above any chart's budget
    built = [charts.group_chart(table, g, 0.6, 5000) for g in charts.METRIC_GROUPS]
    built += [charts.early_warning_charts(table, max_points=5000), charts.eval_chart(table, 5000),
              charts.throughput_chart(table, 0.6, 5000),
              charts.overlay_chart({"a": table, "b": table, "c": table}, "loss", 0.6, 5000)]
    assert alt.data_transformers.options.get("max_rows", 5000) == 5000
    for chart in built:
        sizes = charts.chart_dataset_sizes(chart)  # to_dict raises MaxRowsError above 5,000 rows
        assert sizes and max(sizes) <= charts.ROWS_PER_DATASET


def test_group_chart_rejects_unknown_group_by_name() -> None:
    with pytest.raises(KeyError, match="no-such-group"):
        charts.group_chart(long_table(100), "no-such-group")


def test_charts_of_an_empty_run_say_no_data() -> None:
    empty = SimpleNamespace(scalars=pd.DataFrame({"step": [], "attempt": []}), alerts=pd.DataFrame())
    spec = charts.group_chart(empty, "optimisation").to_dict()
    assert spec["mark"]["type"] == "text"
    assert charts.eval_chart(empty).to_dict()["mark"]["type"] == "text"


def test_alerts_land_on_their_signal_panel_by_metric_or_rule_name() -> None:
    table = long_table(100)
    by_key = {s.key: s for s in charts.EARLY_WARNING_SIGNALS}
    assert list(charts.alerts_for_signal(table.alerts, by_key["variance"])["rule"]) == ["variance_collapse"]
    assert list(charts.alerts_for_signal(table.alerts, by_key["rank"])["rule"]) == ["rank_collapse"]
    assert list(charts.alerts_for_signal(table.alerts, by_key["leak"])["rule"]) == ["mask_leak"]
    assert charts.alerts_for_signal(table.alerts, by_key["ema"]).empty
    spec = charts.early_warning_charts(table).to_dict()
    rule_layers = [d for d in spec["datasets"].values() if d and "severity" in d[0]]
    assert rule_layers, "alert markers missing from the early-warning charts"


def test_eval_chart_draws_step_zero_baseline_as_dashed_rule() -> None:
    scalars = pd.DataFrame({"step": [0, 0, 100, 200], "attempt": [1] * 4,
                            "knn/accuracy": [0.2, np.nan, 0.5, 0.6],
                            "linear_probe/val_acc": [np.nan, 0.25, 0.55, 0.65]})
    baseline = charts.baseline_frame(scalars)
    assert dict(zip(baseline["metric"], baseline["baseline"])) == {"knn/accuracy": 0.2,
                                                                   "linear_probe/val_acc": 0.25}
    spec = charts.eval_chart(scalars).to_dict()
    dashed = [layer for layer in spec["layer"] if layer["mark"].get("strokeDash")]
    assert dashed and dashed[0]["mark"]["type"] == "rule"


def test_the_worse_than_init_panel_marks_each_readings_random_init_value() -> None:
    import json

    scalars = pd.DataFrame({"step": [0, 100, 200], "attempt": [1] * 3,
                            "knn/accuracy": [0.38, 0.41, 0.34], "linear_probe/val_acc": [0.60, 0.58, 0.51]})
    spec = json.dumps(charts.early_warning_charts(SimpleNamespace(scalars=scalars, alerts=None)).to_dict())
    assert spec.count('"title": "random init"') == 2  # one dashed rule per reading, at its step-0 value
    later = scalars[scalars["step"] > 0]  # a run that never evaluated at step 0 has nothing to mark
    assert '"random init"' not in json.dumps(
        charts.early_warning_charts(SimpleNamespace(scalars=later, alerts=None)).to_dict())


def test_overlay_frame_names_runs_as_given_and_respects_budget() -> None:
    table = long_table(20_000)
    frame = charts.overlay_frame({XSS: table, "b": table}, "loss", 0.5, 5000)
    assert set(frame["run"]) == {XSS, "b"}  # a plain string in the data: Vega draws it as text
    assert len(frame) <= charts.ROWS_PER_DATASET


def test_safe_text_escapes_markup() -> None:
    assert charts.safe_text(XSS) == "&lt;img src=x onerror=window.__xss=1&gt;"


def test_short_series_get_point_marks_long_ones_do_not() -> None:
    short = charts.group_chart(long_table(20), "optimisation").to_dict()
    long = charts.group_chart(long_table(5000), "optimisation").to_dict()
    assert short["spec"]["layer"][1]["mark"].get("point") is True
    assert long["spec"]["layer"][1]["mark"].get("point") is False
