"""research/stretched_replay.py: a stream, its schedule and its cadences stretched alike, and every rule judging both
alike: on a synthetic stream and on a sample of the detection library (the script judges every case)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # research/: its scripts by name
import stretched_replay  # noqa: E402

from jepa_core.alerts.clock import RunClock  # noqa: E402
from jepa_core.alerts.engine import evaluate_rows  # noqa: E402
from jepa_core.method.schedules import LrSchedule  # noqa: E402


def stream() -> list[dict]:
    rows = []
    for step in range(0, 401, 10):
        row = {"step": step, "loss": 1.0 - step / 1000, "grad_norm": 1.0,
               "mask/overlap_fraction": 0.1 if step >= 300 else 0.0}
        if step % 100 == 0:
            probe = 0.6 if step < 200 else 0.45
            row.update({"linear_probe/val_acc": probe, "knn/accuracy": probe - 0.2})
            if step == 0:
                row.update({"linear_probe/val_acc_noise": 0.012, "knn/accuracy_noise": 0.012})
        rows.append(row)
    return rows


def test_stretching_multiplies_the_steps_the_schedule_and_the_clock_alike():
    rows = stream()
    assert [r["step"] for r in stretched_replay.stretched(rows, 10)] == [r["step"] * 10 for r in rows]
    facts = {"feature_dim": 96, "lr_schedule": LrSchedule(5e-4, 1e-5, 1e-6, 80, 1600), "eval_count": 1000,
             "clock": RunClock(20, 1600)}
    out = stretched_replay.stretched_facts(facts, 10)
    assert (out["lr_schedule"].warmup_steps, out["lr_schedule"].steps) == (800, 16000)
    assert out["clock"] == RunClock(200, 16000)
    assert out["feature_dim"] == 96 and out["eval_count"] == 1000
    assert stretched_replay.stretched_facts({"lr_schedule": None, "clock": None}, 10) == {"lr_schedule": None,
                                                                                         "clock": None}


def test_a_synthetic_stream_draws_the_same_alerts_at_ten_times_the_steps():
    rows = stream()
    clock = RunClock(10, 400)
    plain = evaluate_rows(rows, clock=clock)
    assert {a.rule for a in plain} >= {"mask_leak", "eval_regression"}  # the stream makes both fire
    stretched = evaluate_rows(stretched_replay.stretched(rows, 10), clock=clock.stretched(10))
    assert stretched_replay.alert_keys(plain, 10) == stretched_replay.alert_keys(stretched)


def test_a_sample_of_the_library_draws_the_same_alerts_at_ten_times_the_steps():
    cases = sorted(random.Random(45).sample(stretched_replay.library_cases(), 60))
    alerted = 0
    for case in cases:
        plain, stretched = stretched_replay.compare(case, 10)
        assert plain == stretched, case
        alerted += bool(plain)
    assert alerted >= 30  # the sample is not a quiet one: most of its cases draw alerts
