"""The detection benchmark's harm label (research/ground_truth.py) on evaluation readings: a run that ends worse
than random init is harmful from the start of its last stretch."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # research/: its scripts by name
from ground_truth import harm, worse_than_init  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # the product rule's test streams
from test_eval_regression import NOISE, stream  # noqa: E402,F401



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
