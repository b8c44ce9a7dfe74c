"""benchmarks/predictor_spread.py: the predictor's output spread against its own recent high, and on the tuning split
the evidence predictor_collapse's fraction was chosen from."""

from __future__ import annotations

import pytest
from benchmark_util import load_benchmark

from jepa_core.config import RulesConfig


def test_the_fraction_is_judged_from_the_rules_warm_up_against_the_window_before_each_reading():
    spread = load_benchmark("predictor_spread")
    rules = RulesConfig()  # warm-up 60 steps, a window of 40
    rows = [{"step": s, "pred/std_mean": v} for s, v in
            [(20, 0.1), (40, 0.2), (60, 0.1), (80, 0.15), (100, 0.02), (120, 0.03), (200, 0.03)]]
    rows.insert(3, {"step": 70, "loss": 1.0})  # a row without the metric is no reading
    series = spread.fractions(rows, rules)
    # 60: 0.1 / max(0.1 at 20, 0.2 at 40) (20 is exactly 40 steps back, and kept); 100: 0.02 / 0.15 (80; 60 is 40
    # back too); 200: no reading within 40 steps before it.
    assert [s for s, _ in series] == [60, 80, 100, 120]
    assert [round(f, 4) for _, f in series] == [0.5, 0.75, round(0.02 / 0.15, 4), 0.2]
    assert [s for s, _ in spread.fractions(rows, rules, after=100)] == [120]


def test_on_the_tuning_split_no_healthy_run_falls_below_the_fraction_and_lr_blow_ups_do(capsys):
    # Rounds 1-40 (the split predictor_collapse was chosen on): the healthy runs' lowest fraction is 0.32, the
    # fraction 0.2; smallctx's lr x35 from 140 (seed 4) falls below it at 147, before every other rule and the loss.
    # Rounds 41-43, which tested it and are tuning data since (rounds 43-44): fastema seed 83 fell to 0.31.
    spread = load_benchmark("predictor_spread")
    assert spread.main([]) == 0
    out = capsys.readouterr().out
    assert "healthy runs 503, lowest fractions: 0.310 fastema/healthy_s83, 0.321 deep/healthy_s0" in out
    assert "healthy runs below the fraction: 0" in out
    counts = next(ln for ln in out.splitlines() if ln.startswith("fault runs below it"))
    harmful, benign = int(counts.split()[-4]), int(counts.split()[-2])
    assert harmful > 200 and benign < harmful / 5
    first = next(ln for ln in out.splitlines() if "smallctx/lr_blowup_35_at140_s4" in ln)
    assert first.strip() == "smallctx/lr_blowup_35_at140_s4 at 147 (others 168, loss 168, harm 189)"
