"""research/stretched_replay.py: a stream and its schedule stretched alike, and the rules whose verdicts carry no
step count (the invariants, and eval_regression) judging both alike."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # research/: its scripts by name
import stretched_replay  # noqa: E402

from jepa_core.alerts.engine import evaluate_rows  # noqa: E402
from jepa_core.method.schedules import LrSchedule  # noqa: E402

NO_STEP_COUNT = {"mask_leak", "target_gradients", "non_finite", "eval_regression"}


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


def test_stretching_multiplies_the_steps_and_the_schedule_alike():
    rows = stream()
    assert [r["step"] for r in stretched_replay.stretched(rows, 10)] == [r["step"] * 10 for r in rows]
    facts = {"feature_dim": 96, "lr_schedule": LrSchedule(5e-4, 1e-5, 1e-6, 80, 1600), "eval_count": 1000}
    out = stretched_replay.stretched_facts(facts, 10)
    assert (out["lr_schedule"].warmup_steps, out["lr_schedule"].steps) == (800, 16000)
    assert out["feature_dim"] == 96 and out["eval_count"] == 1000
    assert stretched_replay.stretched_facts({"lr_schedule": None}, 10) == {"lr_schedule": None}


def test_rules_without_a_step_count_judge_a_stretched_run_alike():
    rows = stream()
    plain = [a for a in evaluate_rows(rows) if a.rule in NO_STEP_COUNT]
    assert {a.rule for a in plain} == {"mask_leak", "eval_regression"}  # the stream makes both fire
    stretched = [a for a in evaluate_rows(stretched_replay.stretched(rows, 10)) if a.rule in NO_STEP_COUNT]
    assert stretched_replay.alert_keys(plain, 10) == stretched_replay.alert_keys(stretched)
