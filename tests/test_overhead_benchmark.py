"""The diagnostics-overhead benchmark's interval: distribution-free, so it must cover the median as often as it says."""

import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from diagnostics_overhead import median_interval  # noqa: E402


def test_interval_brackets_the_sample_median_and_narrows_with_more_rounds():
    rng = random.Random(0)
    few = [1.0 + rng.gauss(0, 0.02) for _ in range(10)]
    many = few + [1.0 + rng.gauss(0, 0.02) for _ in range(90)]
    for values in (few, many):
        low, high = median_interval(values)
        assert low <= statistics.median(values) <= high
    assert median_interval(many)[1] - median_interval(many)[0] < median_interval(few)[1] - median_interval(few)[0]
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few rounds for 95%: the whole range


def test_interval_covers_the_true_median_at_least_95_percent_of_the_time():
    rng = random.Random(1)
    true_median = 1.0  # of 1 + lognormal noise shifted to median 0: a skewed, timing-like distribution
    hits = 0
    for _ in range(2000):
        values = [true_median + (rng.lognormvariate(0, 0.5) - 1.0) * 0.05 for _ in range(15)]
        low, high = median_interval(values)
        hits += low <= true_median <= high
    assert hits / 2000 >= 0.95
