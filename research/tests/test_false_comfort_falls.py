"""research/false_comfort_falls.py: each signal's fall is read between the last readings at or before the two ends
of the span, whatever the signal's cadence, and a signal without a reading at both ends is left out."""

from __future__ import annotations

import pytest
from research_util import load_research


def test_falls_are_read_at_each_signals_own_cadence():
    falls = load_research("false_comfort_falls")
    rows = [{"step": s, "target/std_mean": 1.0 - s / 1000, "loss": 2.0, "pred_target/cosine": 0.5 + s / 1000}
            for s in range(0, 301, 10)]
    for s in (0, 150, 300):  # the pooled rank is read every 150 steps
        rows[s // 10]["target/effective_rank"] = 8.0 - s / 50
    moved = falls.movement(rows, 300, 100)
    assert moved["per-batch spread"] == pytest.approx(1 - 0.70 / 0.80)
    assert moved["pooled rank"] == pytest.approx(1 - 2.0 / 5.0)  # 300 against 150, its last reading by step 200
    assert moved["loss"] == 0.0
    assert moved["cosine rise"] == pytest.approx(0.1)
    assert "token rank" not in moved  # never logged
    assert falls.movement(rows, 295, 100)["pooled rank"] == 0.0  # its reading at 150 stands for both ends
    assert set(falls.movement(rows, 50, 100)) == set()  # nothing 100 steps before step 50


def test_a_false_alarm_is_placed_among_the_harmful_runs():
    falls = load_research("false_comfort_falls")
    harmful = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1]
    assert falls.quantile(harmful, 0.1) == 0.2
    assert falls.quantile(harmful, 0.5) == 0.6
    assert falls.share_below(harmful, 0.25) == pytest.approx(2 / 11)
    assert falls.share_below(harmful, 0.05) == 0.0
