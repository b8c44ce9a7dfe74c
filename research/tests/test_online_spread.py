"""research/online_spread.py: the ratio of the online encoder's fixed-batch spread to the target's, its largest fall
below the floor, and, on the recorded study round, the evidence `online_collapse`'s thresholds were chosen from."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace

import pytest
from research_util import load_research

from jepa_core.config import RulesConfig
from jepa_core.workbench.doctor import run_facts

LIBRARY = load_research("library")


def _rows(ratios: list[tuple[int, float]]) -> list[dict]:
    return [{"step": s, "online/fixed_batch_std_mean": 0.8 * r, "target/fixed_batch_std_mean": 0.8} for s, r in ratios]


def test_the_ratio_starts_at_the_rules_warm_up_and_its_fall_counts_only_below_the_floor():
    spread = load_research("online_spread")
    rules = RulesConfig()
    rows = _rows([(40, 0.9), (60, 0.5), (80, 0.3), (100, 0.2), (120, 0.12), (140, 0.5), (160, 0.1)])
    series = spread.ratios(rows, rules.warmup_steps)
    assert [s for s, _ in series] == [60, 80, 100, 120, 140, 160]
    assert series[0][1] == pytest.approx(0.5)
    # At 120 the ratio is below 0.15 and 0.3 / 0.12 = 2.5x below the highest of the 60 steps before (80-100: the
    # reading at 60 is exactly 60 steps back, and kept); at 160, 0.5 / 0.1 = 5x.
    assert spread.largest_fall(series, rules) == (pytest.approx(5.0), 160)
    assert spread.largest_fall(series[:-1], rules) == (pytest.approx(0.5 / 0.12), 120)
    assert spread.largest_fall(series, rules, after=160) == (0.0, None)  # nothing after the onset


def test_on_the_tuning_split_no_healthy_run_fires_and_its_steep_falls_come_inside_the_warm_up_wait():
    # The evidence online_collapse's thresholds were chosen from (docs/research/early-warning.md): no healthy run of
    # the split it was tuned on draws it, and a healthy run whose ratio does fall below the floor as steeply as the
    # rule asks does so within the lr warm-ups the rule waits out (a healthy online spread falls like a collapse
    # while the lr warms up).
    spread = load_research("online_spread")
    rules = RulesConfig()
    healthy, steep = 0, []
    for case_dir in spread.library_cases(LIBRARY.LIBRARY):
        info, rows = spread.load_case(case_dir)
        series = spread.ratios(rows, rules.warmup_steps)
        if info["fault"] is not None or not series or LIBRARY.Case(info["setting"], info["seed"]).split != "tune":
            continue
        healthy += 1
        assert not [a for a in spread.judge(case_dir, rules).alerts if a.rule == "online_collapse"], case_dir
        fall, step = spread.largest_fall(series, rules)
        if fall >= rules.online_lead_fall:
            steep.append((step / run_facts(case_dir)["lr_schedule"].warmup_steps, case_dir))
    assert healthy >= 100
    assert steep and all(warmups < rules.online_lead_after_warmups for warmups, _ in steep), steep


def test_the_report_on_a_small_library_says_what_the_ratios_and_the_rules_say(tmp_path, capsys):
    # The script on a copied handful of cases: its figures are those of ratios(), largest_fall() and judge().
    spread = load_research("online_spread")
    rules = RulesConfig()
    names = ("heads8/healthy_s3", "augment/healthy_s67", "augment/collapse_0.34_at100_s67")
    for name in names:
        shutil.copytree(LIBRARY.LIBRARY / name, tmp_path / name)
    assert spread.main(["--library", str(tmp_path), "--split", "both"]) == 0
    out = capsys.readouterr().out
    falls = {name: spread.largest_fall(spread.ratios(spread.load_case(tmp_path / name)[1], rules.warmup_steps), rules)
             for name in names[:2]}
    header = re.search(r"healthy runs (\d+): online_collapse fires on (\d+); largest fall below the floor ([0-9.]+)x",
                       out)
    assert header and (int(header[1]), int(header[2])) == (2, 0)
    assert float(header[3]) == pytest.approx(max(f for f, _ in falls.values()), abs=5e-3)
    (line,) = [ln for ln in out.splitlines() if ln.strip().endswith("augment/collapse_0.34_at100_s67")]
    label, _, harm_step, _, others, _, own = line.split()[:7]
    judged = spread.judge(tmp_path / names[2], rules)
    without = spread.judge(tmp_path / names[2], replace(rules, online_lead_floor=0.0))
    assert (label == "harmful") == judged.harmful and harm_step == str(judged.harm_step)
    assert others == str(without.first)
    assert own == str(min(a.step for a in judged.alerts if a.rule == "online_collapse"))
    assert int(own) < judged.harm_step  # caught before its harm, and by this rule alone
