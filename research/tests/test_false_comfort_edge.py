"""The tuning split's one remaining miss, trained on past the library's stop: `manytargets`' lr x30 from step 200
(seed 1, round 22) draws a critical `false_comfort` at 288 on a run the harm label calls benign.

The library stops that run at 300. Its continuation to the end of the schedule (step 400) was trained from scratch with
the same setting, seed and fault (`runtime.num_threads=1`, as the library trains) and thinned as the library thins;
research/data/studies/ keeps its rows from 296 on, and its row at 296 equals the record's in every value (only the
attempt differs: the record is a branch, resumed once). Spliced, they show what any confirmation of the alert would have
to be: the combination holds from 280 through 304, four readings, so a confirmation of two to four readings only moves
the critical alert past the library's stop, and the run stays benign to the end of its schedule.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import shutil

from research_util import load_research
from jepa_core.alerts.engine import evaluate_rows
from jepa_core.config.rules import RulesConfig

LIBRARY = load_research("library")
DETECTION = load_research("detection")
GROUND_TRUTH = load_research("ground_truth")
CASE = LIBRARY.LIBRARY / "manytargets" / "lr_blowup_30_at200_s1"
CONTINUATION = LIBRARY.REPO / "research" / "data" / "studies" / "manytargets_lr_blowup_30_at200_s1_to400.jsonl.gz"


def _spliced() -> tuple[list[dict], list[dict], list[dict]]:
    """(the run as the library records it, the run to step 400, its healthy run)."""
    info, recorded, healthy = DETECTION.whole_rows(CASE)
    with gzip.open(CONTINUATION, "rt", encoding="utf-8") as f:
        after = [json.loads(line) for line in f]
    return recorded, [r for r in recorded if r["step"] < after[0]["step"]] + after, healthy


def _criticals(rows: list[dict], readings: int) -> list[tuple[str, int]]:
    rules = dataclasses.replace(RulesConfig(), false_comfort_critical_readings=readings)
    return [(a.rule, a.step) for a in evaluate_rows(rows, rules, feature_dim=96) if a.severity == "critical"]


def test_the_continuation_starts_where_the_record_ends_the_same_run():
    recorded, _, _ = _spliced()
    with gzip.open(CONTINUATION, "rt", encoding="utf-8") as f:
        first = json.loads(f.readline())
    same_step = next(r for r in recorded if r["step"] == first["step"] and "loss" in r)
    assert {k: v for k, v in first.items() if k != "attempt"} == {
        k: v for k, v in same_step.items() if k != "attempt"}
    # The library stops the run at 300, off its 8-step cadence: its last row is 296.
    assert max(r["step"] for r in recorded) == 296 and json.loads((CASE / "case.json").read_text())["until"] == 300


def test_the_false_alarm_is_no_artefact_of_the_library_stopping_the_run():
    recorded, whole, _ = _spliced()
    assert max(r["step"] for r in whole) == 400  # the end of manytargets' schedule
    # As recorded and as trained on, the rules of the library are critical at 288 (the second reading in a row).
    assert _criticals(recorded, 2) == _criticals(whole, 2) == [("false_comfort", 288)]
    # Confirmations of up to four readings only move the alert past the library's stop at 300 ...
    assert _criticals(recorded, 4) == []
    assert _criticals(whole, 3) == [("false_comfort", 296)] and _criticals(whole, 4) == [("false_comfort", 304)]
    # ... because the combination holds for four readings, 280-304, and then breaks.
    assert _criticals(whole, 5) == []


def test_the_run_stays_benign_by_the_label_to_the_end_of_its_schedule():
    _, whole, healthy = _spliced()
    assert GROUND_TRUTH.harm(whole, 200, healthy) == (None, None)
    ranks = GROUND_TRUTH.readings(whole, "target/effective_rank")
    healthy_ranks = GROUND_TRUTH.readings(healthy, "target/effective_rank")
    ratios = [ranks[s] / healthy_ranks[s] for s in (320, 360, 400)]
    # A hair above the label's halving at each new reading, and still sliding.
    assert all(GROUND_TRUTH.COLLAPSE_FRACTION < r < 0.55 for r in ratios) and ratios == sorted(ratios, reverse=True)


def test_a_looser_collapse_label_would_call_it_harmful_and_leave_harmful_runs_uncaught():
    # The study of the label's edge (`python research/detection.py --split tune --collapse-fraction 0.66`): within
    # the library's window the run's last pooled-rank reading (280) is 0.65 of its healthy run's, so only a label
    # looser than that calls it harmful, and the alert at 288 then comes after its harm.
    judged = DETECTION.judge(CASE, collapse_fraction=0.66)
    assert (judged.harm_step, judged.harm_why) == (280, "effective_rank below 0.66 of healthy")
    assert DETECTION.judge(CASE, collapse_fraction=0.6).harm_step is None
    assert DETECTION.judge(CASE).harm_why is None
    # ... and runs the label calls benign become harmful that no rule flags: `nodecay`'s collapse of weight 0.31
    # from 90 (seed 0) reads its pooled rank at 0.59 of its healthy run's at its last reading (180; its spread 0.76),
    # with no alert.
    looser = DETECTION.judge(LIBRARY.LIBRARY / "nodecay" / "collapse_0.31_at90_s0", collapse_fraction=0.66)
    assert (looser.harm_step, looser.harm_why, looser.alerts) == (180, "effective_rank below 0.66 of healthy", [])
    assert not DETECTION.judge(LIBRARY.LIBRARY / "nodecay" / "collapse_0.31_at90_s0").harmful


def test_the_benchmark_says_a_study_of_the_label_is_not_figures_to_quote(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(DETECTION, "MADE_FOR", {})  # two runs: no rule's coverage is judged here
    for name in ("lr_blowup_30_at200_s1", "healthy_s1"):
        shutil.copytree(CASE.parent / name, tmp_path / "manytargets" / name)
    assert DETECTION.main(["--library", str(tmp_path), "--split", "tune"]) == 1  # the false alarm
    assert "A STUDY OF THE LABEL" not in capsys.readouterr().out
    assert DETECTION.main(["--library", str(tmp_path), "--split", "tune", "--collapse-fraction", "0.66"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("A STUDY OF THE LABEL") and "0.66" in out.splitlines()[0]
    # at the edge the run is harmful: its critical alert is no false alarm, and the healthy run draws none
    alarms = re.search(r"critical false alarms: healthy (\d+)/(\d+), benign (\d+)/(\d+)", out)
    assert alarms and [int(n) for n in alarms.groups()] == [0, 1, 0, 0]
