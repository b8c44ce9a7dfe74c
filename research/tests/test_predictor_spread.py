"""research/predictor_spread.py: the predictor's output spread against its own recent high, and on the tuning split
the evidence predictor_collapse's fraction was chosen from."""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import replace

import pytest
from research_util import load_research

from jepa_core.config import RulesConfig

LIBRARY = load_research("library")


def test_the_fraction_is_judged_from_the_rules_warm_up_against_the_window_before_each_reading():
    spread = load_research("predictor_spread")
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


def _tuning_cases(spread) -> list:
    return [d for d in spread.library_cases(LIBRARY.LIBRARY) if spread.Case(
        d.parent.name, json.loads((d / "case.json").read_text())["seed"]).split == "tune"]


def test_on_the_tuning_split_no_healthy_run_falls_below_the_fraction_and_lr_blow_ups_do():
    # The evidence predictor_collapse's fraction was chosen from (docs/research/early-warning.md): on the split it
    # was tuned on, every healthy run's spread stays above the fraction of its recent high, and many harmful lr
    # blow-ups fall below it after their onset, few benign ones.
    spread = load_research("predictor_spread")
    rules = RulesConfig()
    healthy, harmful, benign = [], 0, 0
    for case_dir in _tuning_cases(spread):
        info, rows, _ = spread.whole_rows(case_dir)
        if info["fault"] is None:
            healthy.append(min((f for _, f in spread.fractions(rows, rules)), default=math.inf))
        elif any(f < rules.predictor_collapse_fraction for _, f in spread.fractions(rows, rules, info["onset"])):
            judged = spread.judge(case_dir)
            harmful, benign = harmful + judged.harmful, benign + (not judged.harmful)
    assert len(healthy) >= 200 and min(healthy) >= rules.predictor_collapse_fraction
    assert harmful > 200 and benign < harmful / 5


def test_an_lr_blow_up_that_silences_the_predictor_falls_below_the_fraction_before_anything_else():
    # smallctx's lr x35 from 140 (seed 4): the predictor's spread falls below the fraction before every other
    # rule's first alert, the loss-only baseline and the harm.
    spread = load_research("predictor_spread")
    rules = RulesConfig()
    case_dir = LIBRARY.LIBRARY / "smallctx" / "lr_blowup_35_at140_s4"
    info, rows, _ = spread.whole_rows(case_dir)
    low = [s for s, f in spread.fractions(rows, rules, info["onset"]) if f < rules.predictor_collapse_fraction]
    others = spread.judge(case_dir, replace(rules, predictor_collapse_fraction=0.0))
    assert low and others.harmful
    assert low[0] < others.first and low[0] < others.loss_step and low[0] < others.harm_step


def test_the_report_on_a_small_library_says_what_the_fractions_say(tmp_path, capsys):
    # The script on a copied handful of cases: its counts are those of fractions() and judge() on the same cases.
    spread = load_research("predictor_spread")
    rules = RulesConfig()
    names = ("smallctx/healthy_s4", "smallctx/lr_blowup_35_at140_s4", "fastema/healthy_s83")
    for name in names:
        shutil.copytree(LIBRARY.LIBRARY / name, tmp_path / name)
    assert spread.main(["--library", str(tmp_path), "--split", "both"]) == 0
    out = capsys.readouterr().out
    lowest = {key: float(low) for low, key in re.findall(r"([0-9.]+) (\S+/healthy_s\d+)", out)}
    for name in ("smallctx/healthy_s4", "fastema/healthy_s83"):
        expected = min(f for _, f in spread.fractions(spread.whole_rows(tmp_path / name)[1], rules))
        assert lowest[name] == pytest.approx(expected, abs=5e-4)
    assert re.search(r"healthy runs 2\b", out) and re.search(r"below the fraction: 0\b", out)
    assert re.search(r"after the onset: 1 harmful, 0 benign", out)
    (first,) = [ln for ln in out.splitlines() if "smallctx/lr_blowup_35_at140_s4 at " in ln]
    info, rows, _ = spread.whole_rows(tmp_path / "smallctx/lr_blowup_35_at140_s4")
    low = [s for s, f in spread.fractions(rows, rules, info["onset"]) if f < rules.predictor_collapse_fraction]
    assert int(first.split(" at ")[1].split()[0]) == low[0]
