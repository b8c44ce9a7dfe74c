"""The detection benchmark's harm label (research/ground_truth.py) on evaluation readings: a run that ends worse
than random init is harmful from the start of its last stretch."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # research/: its scripts by name
from ground_truth import harm, worse_than_init  # noqa: E402

NOISE = 0.015  # one evaluation's noise, as a digit run measures it (1,000 probe-val images)


def stream(evals: list[tuple[int, float, float]], noise: float | None = NOISE, loss: float = 1.0) -> list[dict]:
    """Rows: a loss reading every 50 steps falling slowly, and evaluations (step, probe, knn); step 0's carries the
    measured noise unless `noise` is None."""
    rows = []
    by_step = {s: (p, k) for s, p, k in evals}
    for step in range(0, max(by_step) + 1, 50):
        row: dict = {"step": step, "loss": loss * (1 - step / 2000)}
        if step in by_step:
            row["linear_probe/val_acc"], row["knn/accuracy"] = by_step[step]
            if step == 0 and noise is not None:
                row["linear_probe/val_acc_noise"] = row["knn/accuracy_noise"] = noise
        rows.append(row)
    return rows


def test_label_calls_a_run_that_ends_worse_than_init_harmful_from_the_start_of_its_last_stretch():
    rows = stream([(0, 0.596, 0.382), (100, 0.55, 0.36), (200, 0.592, 0.391), (300, 0.507, 0.338),
                   (400, 0.456, 0.348), (500, 0.448, 0.355)])
    assert worse_than_init(rows, -1) == 300  # 100 dipped too, but recovered at 200
    assert harm(rows, -1) == (300, "evaluation ends below random init")


def test_label_needs_both_readings_below_init_at_the_end():
    rows = stream([(0, 0.596, 0.382), (300, 0.507, 0.338), (400, 0.456, 0.40)])
    assert worse_than_init(rows, -1) is None
    assert worse_than_init(stream([(0, 0.5, 0.3), (300, 0.4, 0.2)], noise=None), -1) is None  # no noise known
    assert worse_than_init(stream([(0, 0.5, 0.3), (300, 0.4, 0.2)], noise=None), -1, eval_count=1000) == 300
