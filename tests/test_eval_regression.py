"""eval_regression (the evaluation readings against the run's random-init reading and its best), the measured noise of
one evaluation (the harm label's "ends worse than random init" is research/tests/test_eval_label.py)."""

from __future__ import annotations

import math

import pytest
import torch

from jepa_core.alerts.engine import RuleEngine, evaluate_rows
from jepa_core.alerts.evaluation import EvalRegressionRule
from jepa_core.config import RulesConfig
from jepa_core.method.probes import score_features


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


def eval_alerts(rows: list[dict], **kw) -> list:
    return [a for a in evaluate_rows(rows, **kw) if a.rule == "eval_regression"]


def test_worse_than_init_on_both_readings_is_critical_with_the_loss_falling():
    # the digit run of seed 31: the loss falls, the probe drops 9 points and the kNN 4 below random init by step 300
    rows = stream([(0, 0.596, 0.382), (100, 0.580, 0.414), (200, 0.592, 0.391), (300, 0.507, 0.338)])
    alerts = eval_alerts(rows)
    assert [(a.step, a.severity, a.metric) for a in alerts] == [(300, "critical", "linear_probe/val_acc")]
    assert "worse than at random init" in alerts[0].message and "loss fell" in alerts[0].message
    assert "8.9 points below" in alerts[0].message


def test_probe_below_init_while_the_knn_is_above_it_is_not_critical():
    # a benign lr blow-up on the shapes: the probe 4 points below init, the kNN above it
    rows = stream([(0, 0.231, 0.215), (55, 0.231, 0.230), (110, 0.236, 0.240), (165, 0.194, 0.221), (220, 0.191, 0.225)],
                  noise=0.0095)
    assert not [a for a in eval_alerts(rows) if a.severity == "critical"]


def test_a_fall_within_the_measured_noise_is_not_judged():
    margin = 3 * math.sqrt(2) * NOISE
    rows = stream([(0, 0.60, 0.40), (100, 0.60 - 0.9 * margin, 0.40 - 0.9 * margin)])
    assert eval_alerts(rows) == []
    rows = stream([(0, 0.60, 0.40), (100, 0.60 - 1.1 * margin, 0.40 - 1.1 * margin)])
    assert [a.severity for a in eval_alerts(rows)] == ["critical"]


def test_both_below_their_best_but_above_init_is_a_warning_then_critical_below_init():
    rows = stream([(0, 0.50, 0.30), (100, 0.65, 0.45), (200, 0.58, 0.38), (300, 0.42, 0.24)])
    alerts = eval_alerts(rows)
    assert [(a.step, a.severity) for a in alerts] == [(200, "warning"), (300, "critical")]
    assert "below its best" in alerts[0].message


def test_one_reading_below_its_best_is_not_a_warning():
    rows = stream([(0, 0.50, 0.30), (100, 0.65, 0.45), (200, 0.58, 0.45)])
    assert eval_alerts(rows) == []


def test_without_a_measured_noise_the_binomial_one_is_used_when_the_count_is_known():
    rows = stream([(0, 0.596, 0.382), (300, 0.507, 0.338)], noise=None)
    assert eval_alerts(rows) == []  # neither measured nor a count: not judged
    assert [a.severity for a in eval_alerts(rows, eval_count=1000)] == ["critical"]
    assert eval_alerts(rows, eval_count=20) == []  # 20 images: a 9-point fall is within the noise


def test_a_run_without_a_step0_evaluation_is_judged_against_its_best_only():
    rows = [r for r in stream([(0, 0.5, 0.3), (100, 0.65, 0.45), (200, 0.40, 0.25)]) if r["step"] != 0]
    rows[0]["linear_probe/val_acc_noise"] = rows[0]["knn/accuracy_noise"] = NOISE  # never read: not step 0
    assert [(a.step, a.severity) for a in eval_alerts(rows, eval_count=1000)] == [(200, "warning")]
    assert eval_alerts(rows) == []  # no measured noise (step 0's is the only one read) and no count


def test_the_rule_is_off_at_zero_and_the_threshold_is_validated():
    rows = stream([(0, 0.596, 0.382), (300, 0.507, 0.338)])
    assert eval_alerts(rows, cfg=RulesConfig(eval_regression_noise_multiple=0.0)) == []
    with pytest.raises(ValueError, match="rules.eval_regression_noise_multiple"):
        RulesConfig(eval_regression_noise_multiple=-1.0).validate()


def test_the_critical_alert_fires_once_per_episode():
    rows = stream([(0, 0.596, 0.382), (300, 0.507, 0.338), (400, 0.456, 0.348), (500, 0.448, 0.355)])
    assert [a.step for a in eval_alerts(rows)] == [300]


def test_rule_watches_the_noise_and_the_engine_builds_it():
    engine = RuleEngine()
    rule = next(r for r in engine.rules if r.name == "eval_regression")
    assert isinstance(rule, EvalRegressionRule)
    assert {"linear_probe/val_acc_noise", "knn/accuracy_noise", "loss"} <= rule.watches


# ---------------------------------------------------------------------------------------------- the measured noise


def test_noise_splits_measure_the_spread_of_readings_over_halvings():
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(400) % 4
    features = torch.randn(400, 8, generator=generator) + 1.5 * torch.nn.functional.one_hot(labels, 8).float()
    plain = score_features(features, labels, knn_k=5, probe_epochs=10)
    measured = score_features(features, labels, knn_k=5, probe_epochs=10, noise_splits=6)
    assert "knn/accuracy_noise" not in plain
    for key in ("knn/accuracy", "linear_probe/val_acc", "linear_probe/train_acc"):
        assert measured[key] == plain[key]  # the reading itself is the usual split's
    for key in ("knn/accuracy_noise", "linear_probe/val_acc_noise"):
        # 200 probe-val images: the binomial noise of an accuracy near 0.7 is about 3 points
        assert 0.003 < measured[key] < 0.1
    again = score_features(features, labels, knn_k=5, probe_epochs=10, noise_splits=6)
    assert again == measured  # seeded: the same splits every time


def test_noise_splits_must_not_be_negative():
    from jepa_core.config import Config, ConfigError
    from jepa_core.run.validation import validate_config

    cfg = Config()
    cfg.eval.noise_splits = -1
    with pytest.raises(ConfigError, match="eval.noise_splits"):
        validate_config(cfg)
