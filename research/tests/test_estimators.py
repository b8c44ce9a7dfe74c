"""research/estimators.py: Spearman's rank correlation and the pairing of estimator readings with the probe."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # research/: its scripts by name
import estimators  # noqa: E402


def test_ranks_share_ties_and_spearman_reads_monotone_relations():
    assert estimators.ranks([3.0, 1.0, 3.0, 2.0]) == [3.5, 1.0, 3.5, 2.0]
    xs = [0.1, 0.5, 0.2, 0.9, 0.7]
    assert estimators.spearman(xs, [x ** 3 for x in xs]) == 1.0
    assert estimators.spearman(xs, [-x for x in xs]) == -1.0
    assert estimators.spearman([1.0, 2.0], [1.0, 2.0]) is None  # too few pairs
    assert estimators.spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None  # a constant side


def test_each_probe_reading_is_paired_with_the_estimators_latest_reading(tmp_path):
    rows = [{"step": 0, "linear_probe/val_acc": 0.5, "target/lidar": 3.0},
            {"step": 20, "target/effective_rank": 4.0},
            {"step": 40, "target/effective_rank": 5.0, "event": "alert"},  # an alert row is not a reading
            {"step": 100, "linear_probe/val_acc": 0.6, "target/lidar": 2.0},
            {"step": 120, "target/effective_rank": 6.0},
            {"step": 200, "linear_probe/val_acc": 0.7, "target/lidar": 4.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = estimators.pairs(tmp_path)
    assert pairs["target/lidar"] == [(3.0, 0.5), (2.0, 0.6), (4.0, 0.7)]
    assert pairs["target/effective_rank"] == [(4.0, 0.6), (6.0, 0.7)]  # none before the first reading
    assert estimators.family(tmp_path) == "unknown"  # no config.toml
    lines = estimators.report([tmp_path])
    assert any(line.startswith("unknown") and "target/lidar" in line and "+0.50" in line for line in lines)
