"""The detection library (research/library.py) and its judge (research/detection.py): the grid, branching a fault
run from a healthy one, thinning, the harm labels, the baselines and the targets; and the demo runs' recorder."""

from __future__ import annotations

import json
import math
import random
import re
import shutil
from pathlib import Path

import pytest

from research_util import BENCHMARKS, load_research
from jepa_core.config import FaultsConfig, RulesConfig, apply_overrides, load_config, preset
from jepa_core.alerts.base import Alert
from jepa_core.alerts.engine import evaluate_rows
from jepa_core.metrics.stream import iter_rows
from jepa_core.workbench.doctor import run_facts
from test_detection import SMALL

LIBRARY = load_research("library")
DETECTION = load_research("detection")


# ------------------------------------------------------------------------------------------------ the library


def test_grid_covers_every_fault_at_every_magnitude_and_onset_on_two_settings():
    cases = LIBRARY.all_cases()
    assert len({c.key for c in cases}) == len(cases)
    switched_on = set()
    for name in FaultsConfig.__dataclass_fields__:  # every fault of the config has a grid
        if name != "start_step":
            cfg = FaultsConfig(**{name: True if isinstance(getattr(FaultsConfig(), name), bool) else 2.0})
            switched_on.update(cfg.active())
    assert set(LIBRARY.FAULTS) == switched_on
    with_faults = [s for s in LIBRARY.SETTINGS if s.onsets]
    assert len(with_faults) >= 2 and len(LIBRARY.SETTINGS) >= 3
    for setting in LIBRARY.SETTINGS:
        seeds = {c.seed for c in cases if c.setting == setting.name and c.fault is None}
        later = {seed for rounds in (LIBRARY.ROUND_SEED_SETTINGS, LIBRARY.ROUND_HEALTHY_SETTINGS)
                 for r, names in rounds.items() if setting.name in names for seed in LIBRARY.ROUND_SEEDS[r]}
        studied = {c.seed for c in LIBRARY.study_cases() if c.setting == setting.name and c.fault is None}
        assert seeds == set(range(5)) | later | studied
    for setting in with_faults:
        assert len(setting.onsets) == 3
        for fault in LIBRARY.FAULTS:
            magnitudes = {m for f, _, m in LIBRARY.grid_cells(setting) if f == fault}
            cells = {(c.magnitude, c.onset) for c in cases
                     if c.setting == setting.name and c.fault == fault and c.seed < LIBRARY.SEEDS}
            assert cells == {(m, o) for m in magnitudes for o in setting.onsets}, (setting.name, fault)
    # the grid: FAULTS' magnitudes and the extra cells, unless a setting names its own
    standard = {(f, m) for f, (_, ms) in LIBRARY.FAULTS.items() for m in ms} | set(LIBRARY.EXTRA_CELLS)
    assert {(f, m) for f, _, m in LIBRARY.grid_cells(LIBRARY.SETTING["tiny"])} == standard
    own = {(f, m) for f, _, m in LIBRARY.grid_cells(LIBRARY.SETTING["defaults"])}
    assert {f for f, _ in own} == set(LIBRARY.FAULTS) and not {(f, m) for f, m in own if f == "collapse"} & standard


def test_splits_hold_out_seeds_and_a_whole_setting():
    cases = LIBRARY.all_cases()
    tune = {c for c in cases if c.split == "tune"}
    test = {c for c in cases if c.split == "test"}
    assert tune and test and not tune & test
    # the test split: every round since the rules last changed (FIRST_TEST_ROUND) up to the newest
    assert test == {c for c in cases if LIBRARY.FIRST_TEST_ROUND <= c.round <= LIBRARY.TEST_ROUND
                    and c.round not in LIBRARY.STUDY_ROUNDS}
    tuned_settings = {c.setting for c in tune}
    assert {c.seed for c in tune}.isdisjoint({c.seed for c in test if c.setting in tuned_settings})
    never_tuned = {s.name for s in LIBRARY.SETTINGS} - tuned_settings
    assert never_tuned == {s.name for s in LIBRARY.SETTINGS if s.round >= LIBRARY.FIRST_TEST_ROUND}
    assert all(c.split == "test" for c in cases if c.setting in never_tuned)
    for split in (tune, test):  # both splits hold every fault
        assert {c.fault for c in split if c.fault} == set(LIBRARY.FAULTS)
    # each later round: every cell of the grid on its new setting and on its new seeds of each earlier setting
    for round_ in {*LIBRARY.ROUND_SEEDS, *(s.round for s in LIBRARY.SETTINGS if s.round > 1)}:
        chosen = {c for c in cases if c.round == round_}
        settings = ({s.name for s in LIBRARY.SETTINGS if s.round == round_}
                    | set(LIBRARY.ROUND_SEED_SETTINGS.get(round_, ())))
        for name in settings:
            cells = {(c.fault, c.magnitude) for c in chosen if c.setting == name and c.fault}
            assert len(cells) == len(LIBRARY.grid_cells(LIBRARY.SETTING[name])), (round_, name)


def test_earlier_test_rounds_are_tuning_data_once_read():
    # Round 2 was the test split until its miss was studied to design steady_collapse, round 3 until its healthy
    # run's deep first descent was studied for the first-descent hold, round 4 until its two slow collapses were
    # studied to make steady_collapse measure from a first descent's recovery, round 5 until its misses at the
    # default cadences were studied, round 6 until its misses at cadences of 100 were, round 7 until its missed
    # collapse and its healthy run the harm label called harmful were, round 8 until its missed collapse and its
    # copied target that tied with the loss were, round 10 until its healthy warning and that tie were studied for
    # the gradient-spike factor, round 11 until its healthy warnings and its near-chance evaluation label were,
    # round 12 until its healthy warning was studied with them for the first-descent hold's depth and time bound,
    # round 13 until its collapse that the evaluation saw first was studied for the spread falling again, round 14
    # until its critical alert on a run the harm label called benign was studied (the run ended one rank reading
    # into a halving that held when trained on: the label's fault, below), round 15 until its collapse that the
    # first-descent hold waited out was studied (a per-batch fall that breaks its trend too is no longer held);
    # recorded cases keep their names and seeds
    # (test_recorded_case_is_what_the_library_would_train_now), only their split changed. Round 9 was recorded to
    # study round 8 and was never a test.
    cases = {c.key: c for c in LIBRARY.all_cases()}
    assert (cases["holdout/collapse_0.3_at500_s2"].round, cases["holdout/collapse_0.3_at500_s2"].split) == (2, "tune")
    assert (cases["tiny/healthy_s7"].round, cases["tiny/healthy_s7"].split) == (3, "tune")
    assert (cases["momentum/collapse_0.3_at250_s0"].round, cases["momentum/collapse_0.3_at250_s0"].split) == (
        4, "tune")
    assert (cases["sparse/collapse_0.3_at300_s0"].round, cases["sparse/collapse_0.3_at300_s0"].split) == (5, "tune")
    assert (cases["blocks/frozen_target_on_at200_s3"].round, cases["blocks/frozen_target_on_at200_s3"].split) == (
        6, "tune")
    assert (cases["batch32/collapse_0.3_at250_s0"].round, cases["batch32/collapse_0.3_at250_s0"].split) == (
        7, "tune")
    assert (cases["batch32/collapse_0.3_at250_s17"].round, cases["batch32/collapse_0.3_at250_s17"].split) == (
        8, "tune")
    assert (cases["batch32_fb/collapse_0.3_at250_s0"].round, cases["batch32_fb/collapse_0.3_at250_s0"].split) == (
        9, "tune")
    assert (cases["defaults/healthy_s3"].round, cases["defaults/healthy_s3"].split) == (10, "tune")
    assert (cases["smalldata/healthy_s3"].round, cases["smalldata/healthy_s3"].split) == (11, "tune")
    assert (cases["px48/healthy_s4"].round, cases["px48/healthy_s4"].split) == (12, "tune")
    assert (cases["px48/collapse_1.2_at300_s26"].round, cases["px48/collapse_1.2_at300_s26"].split) == (13, "tune")
    assert (cases["warmup/lr_blowup_25_at300_s1"].round, cases["warmup/lr_blowup_25_at300_s1"].split) == (
        14, "tune")
    assert (cases["narrow/collapse_0.25_at175_s0"].round, cases["narrow/collapse_0.25_at175_s0"].split) == (
        15, "tune")
    assert (cases["shallow/collapse_0.7_at165_s1"].round, cases["shallow/collapse_0.7_at165_s1"].split) == (
        18, "tune")
    # Rounds 16-19 tested the rules of a54701c; the rules changed after round 19 was read (rank_collapse's floor,
    # the fixed-batch trend's span), so they are tuning data. Rounds 20-25 tested the rules of f2f983b; ema_runaway's
    # distance jump was then chosen on them, so they are tuning data too. Rounds 26-28 tested the rules of 3b5461fc;
    # steady_collapse's steep fall was then chosen on rounds 1-28, and rounds 29-31 tested the rules of e88ef032;
    # online_collapse was then chosen on round 34 (a study round, tuning data from the start), and rounds 32-33,
    # defined and set training before it, tested it; its wait of 2.25 lr warm-ups was then chosen on rounds 32-34,
    # and round 35, defined and set training before round 33's healthy warnings were studied, tests the rules since;
    # rounds 36 and 37, recorded on the same rules (71c10261 changed no behaviour), tested them too. Round 38 was
    # defined and set training on those rules; ema_runaway's schedule-relative feature jump and ema_stalled's
    # momentum floor were then chosen on rounds 1-37, so rounds 35-37 are tuning data; round 38 tested those rules,
    # read once, and online_collapse's wait was chosen again on rounds 1-38: rounds 39-40 tested the rules since.
    # Round 41 was defined and set training on those rules; predictor_collapse and false_comfort's confirmation
    # were then chosen on rounds 1-40, so rounds 39-40 are tuning data and rounds 41-42 tested the rules since.
    # Round 43 was defined and set training on those rules; the agreement fall's window and the healthy runs'
    # evaluation label were then chosen on rounds 1-42, so rounds 41-42 are tuning data and round 43 tested them.
    # Round 44 was defined and set training on those rules; the benchmark's blunt faults were then widened to the
    # evaluation baseline's tie at the first changed reading (round 43's one miss), so round 43 is tuning data too.
    assert all(c.split == "tune" for r in range(2, 44) for c in LIBRARY.round_cases(r))
    assert (cases["thinpred/collapse_0.45_at110_s55"].round, cases["thinpred/collapse_0.45_at110_s55"].split) == (
        28, "tune")
    assert (LIBRARY.FIRST_TEST_ROUND, LIBRARY.TEST_ROUND) == (44, 45)
    assert all(c.split == "test" for r in (44, 45) for c in LIBRARY.round_cases(r))
    assert (cases["tiny/healthy_s73"].round, cases["tiny/healthy_s73"].split) == (37, "tune")
    assert (cases["slowlr/healthy_s75"].round, cases["longramp/healthy_s0"].split) == (38, "tune")
    assert (cases["calib/healthy_s77"].round, cases["flatwd/healthy_s0"].split) == (39, "tune")
    assert (cases["shallow/healthy_s81"].round, cases["lowbeta/healthy_s0"].split) == (41, "tune")
    assert (cases["twoblock/healthy_s85"].round, cases["patch8/healthy_s0"].split) == (43, "tune")
    assert (cases["patch8/healthy_s87"].round, cases["w72/healthy_s0"].split) == (44, "test")


def test_a_study_round_is_tuning_data_and_holds_each_fault_runs_parent():
    cases = LIBRARY.round_cases(34)
    assert cases == LIBRARY.study_cases() and 34 in LIBRARY.STUDY_ROUNDS
    assert {c.round for c in cases} == {34} and {c.split for c in cases} == {"tune"}
    assert 34 not in range(LIBRARY.FIRST_TEST_ROUND, LIBRARY.TEST_ROUND + 1) or cases[0].split == "tune"
    healthy = {c for c in cases if c.fault is None}
    assert len(healthy) >= 10 and all(c.parent in healthy for c in cases if c.fault is not None)
    assert all(c.onset in LIBRARY.SETTING[c.setting].onsets for c in cases if c.fault is not None)


@pytest.mark.parametrize("round_", [4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                                    26, 27, 28, 29, 30, 31, 32, 33, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45])
def test_a_round_can_add_healthy_runs_only_on_some_settings(round_):
    cases = LIBRARY.round_cases(round_)
    for name in LIBRARY.ROUND_HEALTHY_SETTINGS[round_]:
        mine = [c for c in cases if c.setting == name]
        assert {c.seed for c in mine} == set(LIBRARY.ROUND_SEEDS[round_]) and all(c.fault is None for c in mine)
    assert sum(c.fault is None for c in cases) >= 10  # enough healthy runs to judge a 1-in-10 warning rate


def test_each_round_is_summed_on_its_own_cases():
    def alert(step, severity):
        return Alert(step, "variance_collapse", severity, "target/std_mean", 0.1, "")

    judged = [
        DETECTION.Judgement("a/healthy_s0", "test", None, None, None, None, [alert(50, "warning")], None, None, round=5),
        DETECTION.Judgement("a/collapse_1_at10_s0", "test", "collapse", 10, 40, "std_mean halved",
                            [alert(30, "warning")], None, 60, 20, round=5),  # before harm and both baselines
        DETECTION.Judgement("a/collapse_2_at10_s0", "test", "collapse", 10, 40, "std_mean halved",
                            [alert(60, "critical")], 50, None, 20, round=5),  # after harm and the loss
        DETECTION.Judgement("b/lr_blowup_3_at10_s1", "test", "lr_blowup", 10, None, None, [alert(20, "critical")],
                            None, None, 20, round=6),  # benign: a critical false alarm
        DETECTION.Judgement("b/healthy_s1", "test", None, None, 30, "knn/accuracy fell", [], None, None, round=6),
    ]
    assert DETECTION.round_lines(judged) == [
        "  round  5: caught 2/2 (1 at or before harm), not blunt before both baselines 1/2, critical false alarms "
        "healthy 0/1 benign 0/0, healthy runs warned 1/1, labelled harmful 0",
        "  round  6: caught 0/0 (0 at or before harm), not blunt before both baselines 0/0, critical false alarms "
        "healthy 0/1 benign 1/1, healthy runs warned 0/1, labelled harmful 1"]


def test_an_empty_split_is_not_a_target_met(tmp_path, capsys):
    # Only tuning cases recorded (the test round not trained yet): the benchmark says so and exits 1.
    source = next(d for d in RECORDED if d.name.startswith("healthy") and case_facts(d)["split"] == "tune")
    copy = tmp_path / source.parent.name / source.name
    copy.mkdir(parents=True)
    for f in source.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    (copy.parent / LIBRARY.CASES_INDEX).write_text(json.dumps({source.name: case_facts(source)}))
    assert DETECTION.main(["--library", str(tmp_path)]) == 1
    assert "no test case is recorded yet" in capsys.readouterr().out


def test_parents_come_before_their_branches_and_every_case_is_valid_config():
    cases = LIBRARY.all_cases()
    position = {c.key: i for i, c in enumerate(cases)}
    for case in cases:
        if case.parent is not None:
            assert position[case.parent.key] < position[case.key]
            assert case.onset < case.until() <= LIBRARY.SETTING[case.setting].steps
        setting = LIBRARY.SETTING[case.setting]
        apply_overrides(preset("tiny"), [*setting.overrides, *LIBRARY.RUN_OVERRIDES, *case.fault_overrides()])


@pytest.mark.slow  # short trainings in subprocesses (~50 s each)
@pytest.mark.parametrize("fault, magnitude, key", [("collapse", 3.0, "collapse_weight"),
                                                   ("target_gradients", True, "target_gradients")])
def test_a_branch_is_its_parent_up_to_the_onset_and_carries_the_fault(tmp_path, monkeypatch, fault, magnitude, key):
    # target_gradients changes the optimizer's layout: the branch re-indexes the healthy checkpoint's Adam state
    import subprocess

    monkeypatch.setattr(LIBRARY, "WORK", tmp_path / "work")
    monkeypatch.setattr(LIBRARY, "LIBRARY", tmp_path / "library")
    small = [s for s in SMALL if not s.startswith(("faults.", "optim.steps", "logging.checkpoint"))]
    setting = LIBRARY.Setting("small", (*small, "logging.checkpoint_every_steps=3"), 6, (3,), 2, "test")
    monkeypatch.setitem(LIBRARY.SETTING, "small", setting)
    parent = LIBRARY.Case("small", 0)
    branch = LIBRARY.Case("small", 0, fault, magnitude, 3)
    for case in (parent, branch):
        cmd, run = LIBRARY.command(case)
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=LIBRARY.REPO, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert LIBRARY._done(run, case)
        LIBRARY.record(case, run)
    p_info, p_rows = LIBRARY.load_case(LIBRARY.record_dir(parent))
    b_info, b_rows = LIBRARY.load_case(LIBRARY.record_dir(branch))
    assert (p_info["status"], b_info["status"], b_info["last_step"]) == ("finished", "stopped", 5)
    assert getattr(load_config(LIBRARY.record_dir(branch) / "config.toml").faults, key) == magnitude
    before = lambda rows: [r for r in rows if r["step"] <= 3]  # noqa: E731
    # Bit for bit up to the onset, in every metric the benchmark reads: the rest of the prefix is the parent's, which
    # the library holds whole.
    assert before(b_rows) == LIBRARY.thin_rows(before(p_rows), 3, LIBRARY.read_keys())
    # (pred/std_mean is read since round 41's predictor_collapse; the predictor's norm is read by nothing.)
    assert any("pred/std_mean" in r for r in before(b_rows))
    assert any("pred/norm_mean" in r for r in before(p_rows)) and not any("pred/norm_mean" in r for r in before(b_rows))
    after = {r["step"]: r for r in b_rows if r["step"] > 3 and "loss" in r}
    healthy = {r["step"]: r for r in p_rows if r["step"] > 3 and "loss" in r}
    assert sorted(after) == [4, 5] and after[5]["loss"] != healthy[5]["loss"]  # update 4 was the first faulty one
    assert not any(k.startswith(("time/", "system/")) for r in b_rows for k in r)  # thinned
    stream = LIBRARY.record_dir(branch) / LIBRARY.RECORD_STREAM
    assert all(r.get("event") is None for r in iter_rows(stream))
    once = stream.read_bytes()
    LIBRARY.record(branch, LIBRARY._work_dir(branch))  # recorded again, as a fresh machine would: the same bytes
    assert stream.read_bytes() == once


# ------------------------------------------------------------------------------------------- labels and baselines


def rows_with(step_values: dict[str, list[tuple[int, float]]]) -> list[dict]:
    merged: dict[int, dict] = {}
    for key, values in step_values.items():
        for step, value in values:
            merged.setdefault(step, {"step": step})[key] = value
    return [merged[s] for s in sorted(merged)]


def test_harm_by_evaluation_fall_rank_collapse_non_finite_and_broken_invariants():
    knn = [(0, 0.20), (100, 0.30), (200, 0.29), (300, 0.245)]
    assert DETECTION.harm(rows_with({"knn/accuracy": knn}), 150) == (300, "knn/accuracy fell")
    assert DETECTION.harm(rows_with({"knn/accuracy": knn[:3]}), 150) == (None, None)  # a 1-point dip is noise
    # 4.5 points below the best is not harm: a healthy run fell 4.05 (quick seed 15, round 7). The evaluation
    # baseline, a more alert watcher, alarms there all the same.
    shallow = rows_with({"knn/accuracy": [*knn[:3], (300, 0.255)]})
    assert DETECTION.harm(shallow, 150) == (None, None)
    assert DETECTION.eval_baseline_step(shallow, 150) == 300
    assert DETECTION.harm(rows_with({"knn/accuracy": knn}), 300) == (None, None)  # before the onset is not harm
    # Against the run without the fault: a fall it makes too is not the fault's (round 11's smalldata, near chance),
    # one that leaves it 2 points behind is.
    assert DETECTION.harm(rows_with({"knn/accuracy": knn}), 150, rows_with(
        {"knn/accuracy": [*knn[:3], (300, 0.255)]})) == (None, None)
    assert DETECTION.harm(rows_with({"knn/accuracy": knn}), 150, rows_with(
        {"knn/accuracy": [*knn[:3], (300, 0.265)]})) == (300, "knn/accuracy fell")
    # A healthy run has no run without a fault: since round 43 its fall counts only 2 points or more below every
    # other healthy run of its setting at the same step (a slide another seed makes too is the setting's).
    healthy_fall = rows_with({"linear_probe/val_acc": [(0, 0.25), (100, 0.33), (200, 0.30), (300, 0.27)]})
    siblings = DETECTION.sibling_evaluations([
        rows_with({"linear_probe/val_acc": [(0, 0.25), (100, 0.30), (200, 0.29), (300, 0.28)]}),
        rows_with({"linear_probe/val_acc": [(0, 0.26), (100, 0.31), (200, 0.31), (300, 0.32)]})])
    assert DETECTION.harm(healthy_fall, -1) == (300, "linear_probe/val_acc fell")  # its own best alone
    assert DETECTION.harm(healthy_fall, -1, siblings=siblings) == (None, None)  # 1 point below the lowest sibling
    lower = rows_with({"linear_probe/val_acc": [(0, 0.25), (100, 0.33), (200, 0.30), (300, 0.259)]})
    assert DETECTION.harm(lower, -1, siblings=siblings) == (300, "linear_probe/val_acc fell")  # 2.1 below all
    # A step no sibling read is judged against the run's own best, as before.
    assert DETECTION.harm(rows_with({"linear_probe/val_acc": [(0, 0.25), (100, 0.33), (250, 0.27)]}), -1,
                          siblings=siblings) == (250, "linear_probe/val_acc fell")
    # Collapse is judged against the healthy run of the same seed, step by step: a rank that falls on its own (as
    # healthy runs' do) is not harm, the same fall with the healthy run holding at 8 is.
    falling = [(s, 8.0) for s in range(0, 200, 20)] + [(200, 3.5), (220, 8.0), (240, 3.0), (260, 2.0), (280, 2.0)]
    healthy = rows_with({"target/effective_rank": [(s, 8.0) for s in range(0, 300, 20)]})
    assert DETECTION.harm(rows_with({"target/effective_rank": falling}), 100, healthy) == (260, "effective_rank halved")
    assert DETECTION.harm(rows_with({"target/effective_rank": falling}), 100) == (None, None)  # no counterfactual
    assert DETECTION.harm(rows_with({"target/effective_rank": falling}), 100, rows_with(
        {"target/effective_rank": [(s, 3.5) for s in range(0, 300, 20)]})) == (None, None)  # 2 of 3.5: not halved
    # A halving at a key's last reading counts on its own: no second reading can confirm it, and the run ends (or
    # the library stops it) halved. One reading halved with another after it is not enough.
    ending = [(s, 8.0) for s in range(0, 260, 20)] + [(260, 3.9)]
    assert DETECTION.harm(rows_with({"target/effective_rank": ending}), 100, healthy) == (260, "effective_rank halved")
    assert DETECTION.harm(rows_with({"target/effective_rank": [*ending, (280, 8.0)]}), 100, healthy) == (None, None)
    std = rows_with({"target/std_mean": [(100, 0.8), (120, 0.3), (140, 0.32)]})
    std_healthy = rows_with({"target/std_mean": [(100, 0.8), (120, 0.7), (140, 0.69)]})
    assert DETECTION.harm(std, 100, std_healthy) == (140, "std_mean halved")
    nan = [(s, 0.3) for s in range(10)] + [(10, math.nan)]
    assert DETECTION.harm(rows_with({"loss": nan}), 5) == (10, "loss non-finite")
    assert DETECTION.harm(rows_with({"mask/overlap_fraction": [(5, 0.0), (10, 0.1)]}), 5) == (10, "mask overlap")
    # A distance of exactly 0 is conclusive at its first reading (at the default cadence the next comes 500 steps
    # later, perhaps after the run has ended).
    distance = [(10, 0.1), (20, 0.0), (30, 0.0)]
    assert DETECTION.harm(rows_with({"ema/relative_param_l2": distance}), 5) == (20, "target copies online")
    assert DETECTION.harm(rows_with({"ema/relative_param_l2": [(10, 0.1), (20, 1e-9)]}), 5) == (None, None)
    # Frozen: the fixed-batch statistics unchanged while the run without the fault moved between the same readings.
    fixed = rows_with({"target/fixed_batch_std_mean": [(10, 1.5), (20, 1.25), (30, 1.25), (40, 1.25)]})
    moving = rows_with({"target/fixed_batch_std_mean": [(10, 1.5), (20, 1.25), (30, 1.26), (40, 1.27)]})
    assert DETECTION.harm(fixed, 15, moving) == (40, "target frozen")
    # ... not where the healthy run itself stood still at six digits (a schedule's end: momentum 1, lr at its floor)
    still = rows_with({"target/fixed_batch_std_mean": [(10, 1.5), (20, 1.25), (30, 1.25), (40, 1.26)]})
    assert DETECTION.harm(fixed, 15, still) == (None, None)
    assert DETECTION.harm(fixed, 15) == (None, None)  # a healthy run is not compared with itself


def test_loss_baseline_fires_on_nan_and_on_a_spike():
    flat = [{"step": s, "loss": 0.5 + 0.001 * math.sin(s)} for s in range(0, 300, 5)]
    assert DETECTION.loss_baseline_step(flat) is None
    falling = [{"step": s, "loss": 1.0 / (1 + s / 50)} for s in range(0, 300, 5)]  # a collapse looks like this
    assert DETECTION.loss_baseline_step(falling) is None
    nan = [dict(r) for r in flat]
    nan[30]["loss"] = math.nan
    assert DETECTION.loss_baseline_step(nan) == nan[30]["step"]
    spike = [dict(r, loss=0.6) if r["step"] == 150 else r for r in flat]  # +20%, many scales above the noise
    assert DETECTION.loss_baseline_step(spike) == 150
    assert DETECTION.loss_baseline_step(spike, after=150) is None  # only firings after the onset count
    early = [dict(r, loss=5.0) if r["step"] == 20 else r for r in flat]  # warm-up transients are not judged
    assert DETECTION.loss_baseline_step(early) is None


def test_eval_baseline_fires_a_margin_below_the_best():
    rows = [{"step": 0, "knn/accuracy": 0.20}, {"step": 25, "knn/accuracy": 0.30}, {"step": 30, "loss": 1.0},
            {"step": 50, "knn/accuracy": 0.27}, {"step": 75, "knn/accuracy": 0.25}]
    assert DETECTION.eval_baseline_step(rows) == 75
    assert DETECTION.eval_baseline_step(rows[:4]) is None


def alert(step: int, severity: str = "warning") -> Alert:
    return Alert(step=step, rule="rank_collapse", severity=severity, metric="m", value=0.0, message="")


def judgement(fault: str | None, alerts: list[Alert], harm_step: int | None = None, why: str | None = None,
              loss: int | None = None, evaluation: int | None = None) -> object:
    return DETECTION.Judgement("s/c", "test", fault, 100 if fault else None, harm_step, why, alerts, loss, evaluation)


@pytest.mark.parametrize("case, missed", [
    (judgement(None, []), 0),
    (judgement(None, [alert(200, "critical")]), 1),  # a critical alert on a healthy run is a false alarm
    (judgement("collapse", [alert(150)], 180, "rank collapsed", None, 175), 0),  # a baseline never firing is beaten
    (judgement("collapse", [alert(175)], 180, "rank collapsed", None, 175), 1),  # a tie is not a lead
    (judgement("collapse", [], 180, "rank collapsed", None, 175), 1),  # missed
    (judgement("collapse", [alert(150, "critical")]), 1),  # critical on a benign run
    (judgement("collapse", [alert(150)]), 0),  # a warning on a benign run is allowed (and counted)
    (judgement("lr_blowup", [alert(110)], 110, "loss non-finite", 110, 125), 0),  # blunt: caught is enough
    # The evaluation at the first reading the fault changed: a tie is the best any signal can do (since round 44) ...
    (DETECTION.Judgement("s/c", "test", "target_gradients", 100, 106, "target trains", [alert(106, "critical")], None,
                         106, 106), 0),
    # ... but not where the evaluation falls at a later reading than the first the fault changed.
    (DETECTION.Judgement("s/c", "test", "target_gradients", 100, 106, "target trains", [alert(112, "critical")], None,
                         112, 106), 1),
])
def test_targets(case, missed):
    _, failures = DETECTION.summary([case])
    assert len(failures) == missed, failures


def test_the_lead_over_harm_is_reported_not_judged():
    # An alert after the harm step still counts as caught (the targets are about the baselines), but the
    # report says how many came at or before harm and the worst lag.
    early, late = (judgement("collapse", [alert(step)], 180, "rank collapsed") for step in (150, 220))
    lines, failures = DETECTION.summary([early, late])
    assert failures == []
    assert "  caught at or before its harm step   1/2 (lead over harm median -5, worst -40)" in lines


def test_the_report_counts_the_harmful_runs_a_critical_alert_would_stop_by_fault():
    runs = [judgement("collapse", [alert(150)], 180, "rank collapsed"),
            judgement("collapse", [alert(150), alert(170, "critical")], 180, "rank collapsed"),
            judgement("lr_blowup", [alert(110, "critical")], 110, "loss non-finite", 110),
            judgement("lr_blowup", [alert(120, "critical")])]  # benign: not counted
    lines, _ = DETECTION.summary(runs)
    assert ("  with a critical alert (what rules.stop_on_critical stops) 2/3: collapse 1/2, lr_blowup 1/1"
            in lines)


def test_warnings_on_healthy_runs_are_limited_to_one_in_ten():
    quiet = [judgement(None, []) for _ in range(9)]
    assert DETECTION.summary([*quiet, judgement(None, [alert(50)])])[1] == []
    assert DETECTION.summary([*quiet, judgement(None, [alert(50), alert(90)])])[1]


# ----------------------------------------------------------------------------------------------- the demo runs


def test_the_case_listing_shows_a_critical_alert_that_follows_four_warnings():
    # Round 24's false alarm (a critical alert at 280 after four warnings) was cut off the one-line listing.
    run = judgement("lr_blowup", [*(alert(step) for step in (210, 266, 273, 280)), alert(280, "critical"),
                                  alert(290)])
    (line,) = DETECTION.case_lines([run])
    assert line.endswith("rank_collapse@273, rank_collapse@280, rank_collapse!@280 (+1 more)")
    assert DETECTION.case_lines([judgement(None, [])])[0].endswith("| no alert")


def test_every_demo_case_is_valid_config():
    bench = load_research("demo_runs", BENCHMARKS)  # the product's demo runs cover every fault of the library
    assert {c.fault for c in bench.cases(3) if c.fault} == set(LIBRARY.FAULTS)
    for case in bench.cases(1):
        apply_overrides(preset("tiny"), list(case.overrides))


def test_library_cases_are_found_where_recorded(tmp_path):
    # A case is recorded once its setting's index names it and its stream is there: a half-done copy, a stream the
    # index does not name, or an index entry whose stream is gone is not a case.
    for name in ("healthy_s0", "healthy_s1", "healthy_s2"):
        (tmp_path / "calib" / name).mkdir(parents=True)
    for name in ("healthy_s0", "healthy_s1"):
        (tmp_path / "calib" / name / LIBRARY.RECORD_STREAM).write_bytes(b"")
    (tmp_path / "calib" / "half_done.tmp").mkdir()
    (tmp_path / "calib" / LIBRARY.CASES_INDEX).write_text(json.dumps({"healthy_s0": {}, "healthy_s2": {}}))
    assert DETECTION.library_cases(tmp_path) == [tmp_path / "calib" / "healthy_s0"]
    assert DETECTION.library_cases(Path(tmp_path / "none")) == []


def test_a_case_missing_from_its_index_is_named_when_loaded(tmp_path):
    (tmp_path / "calib" / "healthy_s0").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"healthy_s0: not recorded .*cases\.json"):
        LIBRARY.load_case(tmp_path / "calib" / "healthy_s0")


def test_recording_adds_a_case_to_its_settings_index_without_losing_the_others(tmp_path, monkeypatch):
    # Two records into one setting keep both entries; the index is written whole, sorted, and no temporary is left.
    monkeypatch.setattr(LIBRARY, "LIBRARY", tmp_path)
    source = next(d for d in RECORDED if d.name.startswith("healthy"))
    run = tmp_path / "work"
    run.mkdir()
    for f in ("config.toml",):
        (run / f).write_bytes((source / f).read_bytes())
    rows = LIBRARY.load_case(source)[1]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "meta.json").write_text(json.dumps({"status": "finished", "last_step": rows[-1]["step"]}))
    info = case_facts(source)
    for seed in (info["seed"], info["seed"] + 1000):
        LIBRARY.record(LIBRARY.Case(info["setting"], seed), run)
    index = json.loads((tmp_path / info["setting"] / LIBRARY.CASES_INDEX).read_text())
    assert list(index) == sorted([f"healthy_s{info['seed']}", f"healthy_s{info['seed'] + 1000}"])
    assert index[f"healthy_s{info['seed']}"]["status"] == "finished"
    assert sorted(p.name for p in (tmp_path / info["setting"]).iterdir()) == sorted([*index, LIBRARY.CASES_INDEX])
    assert LIBRARY.load_case(tmp_path / info["setting"] / f"healthy_s{info['seed']}")[1] == rows


# ------------------------------------------------------------------------------------------ the recorded library


RECORDED = LIBRARY.recorded_cases(LIBRARY.LIBRARY)


def case_facts(case_dir: Path) -> dict:
    return LIBRARY.read_index(case_dir.parent)[case_dir.name]


def test_library_stays_small_and_holds_only_recorded_cases():
    total = sum(p.stat().st_size for p in LIBRARY.LIBRARY.rglob("*") if p.is_file())
    assert total < 30 * 1024 * 1024
    known = {c.key for c in LIBRARY.all_cases()}
    for case_dir in RECORDED:
        assert f"{case_dir.parent.name}/{case_dir.name}" in known, case_dir
        assert {p.name for p in case_dir.iterdir()} == {"config.toml", LIBRARY.RECORD_STREAM}
    # Nothing on disk that no index names: each setting holds its index and its cases' directories.
    for setting_dir in LIBRARY.LIBRARY.iterdir():
        assert {p.name for p in setting_dir.iterdir()} == {LIBRARY.CASES_INDEX, *LIBRARY.read_index(setting_dir)}


def test_a_fault_record_is_judged_as_its_whole_stream():
    # Before its onset a fault record keeps only what the benchmark reads; with its healthy run's whole prefix in
    # its place (the stream it was thinned from, bit for bit) every rule and every label says the same.
    from jepa_core.alerts.engine import evaluate_rows

    faults = [d for d in RECORDED if case_facts(d)["fault"] is not None]
    assert len(faults) > 400
    kept = RulesConfig(predictor_collapse_fraction=0.0)
    for case_dir in faults:
        info, rows = LIBRARY.load_case(case_dir)
        healthy = LIBRARY.load_case(case_dir.parent / f"healthy_s{info['seed']}")[1]
        onset = info["onset"]
        whole = [r for r in healthy if r["step"] <= onset] + [r for r in rows if r["step"] > onset]
        assert sum(map(len, whole)) > sum(map(len, rows)), case_dir  # the record really is thinner
        assert DETECTION.whole_rows(case_dir)[1] == whole  # what the benchmark replays
        # The rules whose metrics every record kept before its onset judge the record alone as the whole stream;
        # predictor_collapse (round 41) reads a metric that the records made before it dropped there.
        assert evaluate_rows(rows, kept) == evaluate_rows(whole, kept), case_dir
        assert DETECTION.harm(rows, onset, healthy) == DETECTION.harm(whole, onset, healthy), case_dir


def assert_recorded_case_is_what_the_library_would_train_now(case_dir, cases):
    case = cases[f"{case_dir.parent.name}/{case_dir.name}"]
    setting = LIBRARY.SETTING[case.setting]
    expected = apply_overrides(preset("tiny"), [*setting.overrides, *LIBRARY.RUN_OVERRIDES, f"runtime.seed={case.seed}",
                                                f"optim.steps={setting.steps}", *case.fault_overrides()])
    recorded = load_config(case_dir / "config.toml")
    for section in ("model", "data", "masks", "optim", "ema", "diagnostics", "eval", "faults", "runtime"):
        assert getattr(recorded, section) == getattr(expected, section), section
    info = case_facts(case_dir)
    assert (info["split"], info["onset"], info["fault"]) == (case.split, case.onset, case.fault)
    assert info["status"] in ("finished", "stopped", "diverged")
    rows = [r for r in iter_rows(case_dir / LIBRARY.RECORD_STREAM)]
    # The stream reaches the run's last step, or its last reading before it: `latewarm`'s windows of 180 steps end
    # between two readings every 16 steps (360, 540).
    assert rows[0]["step"] == 0
    assert rows[-1]["step"] <= info["last_step"] < rows[-1]["step"] + recorded.diagnostics.basic_every_steps


LIBRARY_SAMPLE = 60  # recorded cases the fast tier checks (a fixed draw over every setting); the slow tier all of them


def test_a_sample_of_recorded_cases_is_what_the_library_would_train_now():
    cases = {c.key: c for c in LIBRARY.all_cases()}
    for case_dir in random.Random(0).sample(RECORDED, min(LIBRARY_SAMPLE, len(RECORDED))):
        assert_recorded_case_is_what_the_library_would_train_now(case_dir, cases)


@pytest.mark.slow
def test_every_recorded_case_is_what_the_library_would_train_now():
    cases = {c.key: c for c in LIBRARY.all_cases()}
    failed = []
    for case_dir in RECORDED:
        try:
            assert_recorded_case_is_what_the_library_would_train_now(case_dir, cases)
        except AssertionError as exc:  # gathered, so one run names every stale record
            failed.append(f"{case_dir.parent.name}/{case_dir.name}: {exc}")
    assert not failed, f"{len(failed)} of {len(RECORDED)} records differ from the library:\n" + "\n".join(failed[:20])


# The tuning split's one known miss on the rules in the run's own units (issue 45): `calib`'s lr x1000 from 225,
# benign by the label, on which false_comfort is critical at 295. (On the rules that counted steps it was
# `manytargets`' lr x30 from 200: docs/research/early-warning.md.) One fixed fails
# test_the_rules_meet_every_target_on_the_tuning_split until it is taken off this set; one new fails it too.
KNOWN_FALSE_ALARMS = {"calib/lr_blowup_1000_at225_s6": "false_comfort"}


def test_a_late_lr_blow_up_on_a_flat_schedule_is_caught_by_the_target_online_distance_jump():
    # Round 25's misses on the rules of f2f983b: lr x9.5 and x42 from step 390 of `flatlr` scrambled the
    # representation (spreads rising, the probe falling). The feature distance on the fixed batch read 3.5x and 6.2x
    # its previous reading at 416, its first reading after the onset; with the jump off, x9.5 draws no alert before
    # its harm (455) and x42 none before the loss-only baseline (440) but predictor_collapse's (since round 41: the
    # predictor's spread at 400, 16 steps earlier still).
    off = RulesConfig(ema_runaway_jump_ratio=0.0)
    for name, ratio in (("flatlr/lr_blowup_9.5_at390_s2", 3.5), ("flatlr/lr_blowup_42_at390_s3", 6.2)):
        judged = DETECTION.judge(LIBRARY.LIBRARY / name)
        first = next(a for a in judged.alerts if a.rule == "ema_runaway")
        assert (first.step, first.rule, first.metric) == (416, "ema_runaway", "ema/fixed_batch_distance")
        assert first.step < judged.harm_step and (judged.loss_step is None or first.step < judged.loss_step)
        assert f"{ratio:.1f}x its previous reading" in first.message
        without = DETECTION.judge(LIBRARY.LIBRARY / name, off)
        assert all(a.step > 416 or a.rule == "predictor_collapse" for a in without.alerts)
        assert [(a.rule, a.step) for a in judged.alerts if a.step < 416] == (
            [("predictor_collapse", 400)] if ratio > 5 else [])


def test_an_lr_blow_up_that_silences_the_predictor_is_caught_before_the_loss_jumps():
    # Round 23's miss, on the tuning split until round 41: `smallctx`'s lr x35 from step 140 (seed 4) jumped the loss
    # at 168, and every rule spoke at 168 or later. Its predictor's output spread over the batch read 0.0065 at 147,
    # 0.04 of its 0.16 at 140 (its healthy run: 0.15): predictor_collapse warns there, 21 steps before the loss.
    judged = DETECTION.judge(LIBRARY.LIBRARY / "smallctx/lr_blowup_35_at140_s4")
    first = judged.alerts[0]
    assert (first.rule, first.step, first.severity, first.metric) == (
        "predictor_collapse", 147, "warning", "pred/std_mean")
    assert (judged.loss_step, judged.eval_step is None or judged.eval_step > 147, judged.harm_step) == (168, True, 189)
    assert "0.04" in first.message and "of its 0.16" in first.message
    without = DETECTION.judge(LIBRARY.LIBRARY / "smallctx/lr_blowup_35_at140_s4",
                              RulesConfig(predictor_collapse_fraction=0.0))
    assert without.first == 168 and not without.beats(without.loss_step)


def test_a_collapse_continuing_the_early_descent_is_caught_by_its_pace_at_any_fixed_batch_cadence():
    # `batch32`'s collapse of weight 0.3 from step 250, with the fixed probe batch read every 250 steps (as it was
    # until round 9) and every 20 (its default since): the same run, bit for bit, and the same harm. Read every 20,
    # the fixed-batch signals catch it at 340. Read every 250, nothing told it from a healthy descent (rounds 7-12)
    # until the per-batch spread's pace past the early phase: 30% below its level 100 steps earlier, at 375 and
    # 400 (two readings), 25 steps before harm.
    judged = {d: DETECTION.judge(LIBRARY.LIBRARY / d) for d in (
        "batch32/collapse_0.3_at250_s0", "batch32_fb/collapse_0.3_at250_s0")}
    sparse, dense = judged["batch32/collapse_0.3_at250_s0"], judged["batch32_fb/collapse_0.3_at250_s0"]
    assert sparse.harm_step == dense.harm_step == 425  # the same run: the probe forwards do not move training
    assert dense.first is not None and dense.first < dense.harm_step
    assert [(a.rule, a.metric, a.step) for a in sparse.alerts] == [("steady_collapse", "target/std_mean", 400)]
    assert "100 steps earlier" in sparse.alerts[0].message
    no_late_fall = RulesConfig(steady_late_fall=0.0)
    assert DETECTION.judge(LIBRARY.LIBRARY / "batch32/collapse_0.3_at250_s0", no_late_fall).first is None
    second_seed = DETECTION.judge(LIBRARY.LIBRARY / "batch32/collapse_0.3_at250_s17")
    assert second_seed.harm_step == 450 and second_seed.first == 400


SHALLOW_COLLAPSES = {"shallow/collapse_0.22_at165_s0": 264, "shallow/collapse_0.22_at165_s37": 330,
                     "shallow/collapse_0.7_at165_s1": 264, "shallow/collapse_2.8_at165_s2": 264}


NO_STEEP_FALL = RulesConfig(steady_steep_fall=0.0)


def test_a_first_reading_the_fault_left_unchanged_does_not_count_against_blunt():
    # depth3's lr x1800 from update 480: its row at 481 equals the healthy run's in every value; by 494 the loss has
    # quadrupled. No signal could be earlier than 494, so the tie with the loss is the blunt case's best.
    judged = DETECTION.judge(LIBRARY.LIBRARY / "depth3/lr_blowup_1800_at480_s4")
    assert (judged.first_loss_reading, judged.loss_step, judged.first) == (494, 494, 494) and judged.blunt
    # ... while a fault whose first reading already differs keeps that reading (the library's usual case).
    other = DETECTION.judge(LIBRARY.LIBRARY / "depth3/lr_blowup_1800_at320_s2")
    assert other.first_loss_reading == 325 and other.blunt


def test_an_evaluation_at_the_first_reading_the_fault_changed_makes_the_fault_blunt():
    # Round 43's one miss on the rules of e146ddac: `patch8`'s target trained from update 330 (seed 4). The first row
    # after the onset, 336, is also an evaluation, and its kNN (0.214, 4.4 points below its best of step 96, where
    # the healthy run drifts 2.4 below) fired the evaluation baseline there; target_gradients was critical at the
    # same row. No signal could be earlier: since round 44 such a fault is blunt (caught is the target), as a loss
    # that shows a fault at that row always made it.
    judged = DETECTION.judge(LIBRARY.LIBRARY / "patch8/target_gradients_on_at330_s4")
    assert (judged.harm_step, judged.first_loss_reading, judged.eval_step, judged.loss_step) == (336, 336, 336, None)
    assert (judged.first, judged.criticals[0].rule) == (336, "target_gradients")
    assert judged.blunt and DETECTION.summary([judged])[1] == []


def test_a_fall_the_healthy_run_makes_too_is_not_harm_but_a_run_left_behind_is():
    # Round 11: a collapse of weight 0.6 on smalldata, kNN 5.2 points below its best at step 300 where its healthy
    # run read 4.2 below its own (the fall near chance they share); the lr x1000 runs labelled by evaluation keep it.
    near_chance = DETECTION.judge(LIBRARY.LIBRARY / "smalldata/collapse_0.6_at250_s2")
    assert (near_chance.harm_step, near_chance.eval_step) == (None, 300)
    left_behind = DETECTION.judge(LIBRARY.LIBRARY / "batch32_fb/lr_blowup_1000_at250_s0")
    assert (left_behind.harm_step, left_behind.harm_why) == (300, "linear_probe/val_acc fell")


def test_a_halving_at_the_last_reading_is_harm_and_an_alert_before_it_is_no_false_alarm():
    # Round 14's one miss: warmup's lr x25 from step 300 (seed 1) drew a critical false_comfort at 405 (loss 0.12
    # against its healthy run's 0.18, prediction cosine 0.84, the fixed-batch spread 40% down in 80 steps), on a run
    # the label called benign: its pooled rank read 0.45 of the healthy run's at step 450, its last reading, where
    # the library stops it. Trained on to step 540, it read 0.41 and 0.38 (the std halved from 495): harm.
    # Since round 41 false_comfort warns at its first reading and is critical at the next that still holds it.
    judged = DETECTION.judge(LIBRARY.LIBRARY / "warmup/lr_blowup_25_at300_s1")
    assert (judged.harm_step, judged.harm_why) == (450, "effective_rank halved")
    assert [(a.rule, a.step) for a in judged.criticals] == [("false_comfort", 420)]
    assert ("false_comfort", 405, "warning") in [(a.rule, a.step, a.severity) for a in judged.alerts]
    assert judged.first is not None and judged.first < judged.harm_step


def test_the_label_check_finds_the_halvings_only_the_last_reading_counts(tmp_path, monkeypatch, capsys):
    # research/label_check.py trains such runs on to see whether the halving holds; here, what it picks and that
    # it skips (and says so) a run whose work directory is not on this machine.
    check = load_research("label_check")
    assert check.pending(LIBRARY.LIBRARY / "warmup/lr_blowup_25_at300_s1") == ("target/effective_rank", 450)
    assert check.pending(LIBRARY.LIBRARY / "calib/collapse_0.3_at75_s0") is None  # two readings in a row
    assert check.pending(LIBRARY.LIBRARY / "smalldata/collapse_0.6_at250_s2") is None  # benign
    monkeypatch.setattr(check, "_work_dir", lambda case: tmp_path / case.setting / case.name)
    assert check.main(["warmup/lr_blowup_25_at300_s1", "calib/collapse_0.3_at75_s0"]) == 0
    out = capsys.readouterr().out.splitlines()
    # the pending run is skipped, by name (its work directory is not here), the other is not pending: nothing tallied
    assert [ln.split(":")[0] for ln in out if "skipped" in ln] == ["warmup/lr_blowup_25_at300_s1"]
    assert [int(n) for n in re.findall(r"\d+", out[-1])] == [0, 0]


def test_relabel_labels_the_run_trained_on_and_says_when_the_label_changes(tmp_path, monkeypatch, capsys):
    # --relabel trains any named run on (pending or not); relabel() labels the longer run. Stand-in later rows: the
    # healthy run's own readings past the end keep a benign run benign; the same with the loss turned non-finite at
    # one of them make it harmful there, and the change is reported.
    check = load_research("label_check")
    case, rows, healthy = check._load(LIBRARY.LIBRARY / "smalldata/collapse_0.6_at250_s2")
    later = [dict(r) for r in healthy if r["step"] > case.until()]
    assert later and rows[-1]["step"] <= case.until()
    changed, lines = check.relabel(case, rows, healthy, later)
    assert not changed and lines[0].endswith(f"trained on to {later[-1]['step']}: benign")
    assert lines[1].startswith("  target/effective_rank / healthy: ") and "1.00" in lines[1]
    bad = next(r for r in later if "loss" in r)
    bad["loss"] = float("nan")
    changed, lines = check.relabel(case, rows, healthy, later)
    assert changed and f"harmful from {bad['step']} (loss non-finite)" in lines[0]
    monkeypatch.setattr(check, "_work_dir", lambda case: tmp_path / case.setting / case.name)
    assert check.main(["--relabel", "smalldata/collapse_0.6_at250_s2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in out if "skipped" in ln] == ["smalldata/collapse_0.6_at250_s2"]
    assert [int(n) for n in re.findall(r"\d+", out[-1])] == [0, 0]
    with pytest.raises(SystemExit):
        check.main(["--relabel"])
    assert "--relabel needs the cases" in capsys.readouterr().err


def test_a_slow_lr_warm_up_moves_the_feature_distance_by_the_schedule_not_by_a_jump():
    # Round 37's healthy `slowlr` (the lr ramped from 1e-5 to 2.5e-4 over 100 steps): the feature distance read
    # about 4x its reading of step 32 at 64, as the lr summed over a linear ramp grows (about the step squared), and
    # ema_runaway warned on all five. Judged against the schedule's own growth (the run's config.toml), none is; a
    # bare stream, without the schedule, still reads the raw jump.
    for seed in range(5):
        case = LIBRARY.LIBRARY / f"slowlr/healthy_s{seed}"
        assert DETECTION.judge(case).alerts == []
        rows, facts = DETECTION.load_case(case)[1], run_facts(case)
        bare = evaluate_rows(rows, None, facts["feature_dim"], None)
        assert [(a.rule, a.metric, a.step) for a in bare] == [("ema_runaway", "ema/fixed_batch_distance", 64)]
        growth = facts["lr_schedule"].summed(64) / facts["lr_schedule"].summed(32)
        assert 3.5 < growth < 3.7  # the schedule alone: what the healthy runs' distance did


def test_a_scrambling_lr_blow_up_shows_in_the_prediction_losing_the_target():
    # `cosema`'s lr x5 from 110 (seed 74, round 37): spreads and ranks rose, the distances did not jump 3x, and the
    # loss rose from 0.107 to 0.275 in 22 steps, within the noise its steep early descent taught the loss baseline;
    # no rule spoke until pred_target/cosine fell 37% below its level of 22 steps before, at 165, 11 steps before the
    # probe showed the harm. Neither baseline fired.
    case = LIBRARY.LIBRARY / "cosema/lr_blowup_5_at110_s74"
    judged = DETECTION.judge(case)
    assert (judged.harm_step, judged.loss_step, judged.eval_step) == (176, None, None)
    first = judged.alerts[0]
    assert (first.rule, first.severity, first.metric, first.step) == ("divergence", "warning", "pred_target/cosine", 165)
    assert "37% below" in first.message
    assert DETECTION.judge(case, RulesConfig(divergence_agreement_fall=0.0)).first is None


def test_healthy_evaluation_slides_are_judged_against_the_other_healthy_runs_of_their_setting():
    # Four healthy runs on 2-block encoders and `quick` slid 5.2-6.7 points below their own best evaluation: the
    # label called them harmful until round 43. Each lies no lower than another healthy run of its setting.
    for name, step in (("quick/healthy_s37", 250), ("shallow/healthy_s1", 360), ("shallow/healthy_s41", 480),
                       ("twoblock/healthy_s84", 600)):
        judged = DETECTION.judge(LIBRARY.LIBRARY / name)
        assert (judged.slid, judged.harmful) == (True, False), name
        info, rows = LIBRARY.load_case(LIBRARY.LIBRARY / name)
        assert DETECTION.harm(rows, -1)[0] == step  # against its own best alone
    # The test is not vacuous: against only the highest-reading other healthy run, shallow seed 1 is harmful.
    info, rows = LIBRARY.load_case(LIBRARY.LIBRARY / "shallow/healthy_s1")
    others = DETECTION._healthy_evaluations(LIBRARY.LIBRARY / "shallow")
    best = max((v for k, v in others.items() if k != "healthy_s1"),
               key=lambda ev: ev["linear_probe/val_acc"].get(360, 0.0))
    assert DETECTION.harm(rows, -1, siblings=[best])[0] is not None


def test_the_rules_meet_every_target_on_the_tuning_split():
    # The split the thresholds were chosen on: a change to a rule that loses a case here is a regression. (The
    # test split's figures are reported by the benchmark, not pinned here.) Each target is checked on the
    # judgements themselves, and the benchmark's own list of missed targets must hold the known miss alone.
    tuning = [DETECTION.judge(d) for d in RECORDED if LIBRARY.Case(
        d.parent.name, case_facts(d)["seed"]).split == "tune"]
    healthy = [j for j in tuning if j.fault is None]
    harmful = [j for j in tuning if j.fault is not None and j.harmful]
    assert len(tuning) >= 200 and len(healthy) >= 50 and len(harmful) >= 100
    assert [j.key for j in harmful if j.first is None] == []  # every harmful run caught
    sharp = [j for j in harmful if not j.blunt]  # and, unless a baseline shows it at once, before both baselines
    assert [j.key for j in sharp if not (j.beats(j.loss_step) and j.beats(j.eval_step))] == []
    assert [j.key for j in healthy if j.harmful] == []  # the label calls no healthy run harmful
    assert sum(len(j.warnings) for j in healthy) <= DETECTION.WARNINGS_PER_HEALTHY_RUN * len(healthy)
    false_alarms = {j.key: sorted({a.rule for a in j.criticals}) for j in tuning if not j.harmful and j.criticals}
    assert false_alarms == {key: [rule] for key, rule in KNOWN_FALSE_ALARMS.items()}
    missed = DETECTION.summary(tuning)[1]
    assert len(missed) == len(KNOWN_FALSE_ALARMS) and all(
        any(key in line for line in missed) for key in KNOWN_FALSE_ALARMS), missed
    assert DETECTION.rule_lines(tuning)[1] == []  # every rule fires on a case made for it


def test_resplit_moves_recorded_cases_to_the_split_cases_py_gives_them_now(tmp_path):
    # A rule change moves FIRST_TEST_ROUND: the records keep their streams, only the split and round in their
    # setting's index follow.
    old = {"setting": "slowlr", "seed": 4, "fault": None, "split": "test", "round": 37, "status": "finished"}
    new = {"setting": "w72", "seed": 0, "fault": None, "split": "test", "round": 44, "status": "finished"}
    for info in (old, new):
        (tmp_path / info["setting"]).mkdir(parents=True)
        (tmp_path / info["setting"] / LIBRARY.CASES_INDEX).write_text(json.dumps({f"healthy_s{info['seed']}": info}))
    assert LIBRARY.resplit(tmp_path) == ["slowlr/healthy_s4"]
    moved = LIBRARY.read_index(tmp_path / "slowlr")["healthy_s4"]
    assert (moved["split"], moved["round"], moved["status"]) == ("tune", 37, "finished")
    assert LIBRARY.read_index(tmp_path / "w72")["healthy_s0"] == new
    assert LIBRARY.resplit(tmp_path) == []


def test_a_run_killed_before_its_config_was_written_starts_afresh(tmp_path, monkeypatch):
    # Killed at start-up, a trainer leaves a directory with only its meta.json: nothing to resume, and a fresh start
    # there would be refused ("already exists"). The next command clears it and starts the run again.
    monkeypatch.setattr(LIBRARY, "WORK", tmp_path / "work")
    case = LIBRARY.Case("calib", 0)
    stale = tmp_path / "work" / "calib" / "healthy_s0"
    (stale / "checkpoints").mkdir(parents=True)
    (stale / "meta.json").write_text('{"status": "stopped"}')
    cmd, run = LIBRARY.command(case)
    assert run == stale and not run.exists() and "--resume" not in cmd and "--name" in cmd


def test_a_branch_is_written_by_a_fresh_interpreter_and_a_failed_one_names_its_case(tmp_path, monkeypatch):
    # The scheduler runs for an hour; a config key added meanwhile (a new rule's threshold) once made it refuse every
    # parent config.toml written since. The branch is written by `library.py --branch` in a new process, which loads
    # the parent's config with the code on disk: here the in-process writer is broken and the branch still comes.
    from jepa_core.config import save_config

    monkeypatch.setattr(LIBRARY, "WORK", tmp_path / "work")
    monkeypatch.setitem(LIBRARY.SETTING, "small", LIBRARY.Setting("small", (), 6, (3,), 2, "test"))
    parent, branch = LIBRARY.Case("small", 0), LIBRARY.Case("small", 0, "collapse", 3.0, 3)
    home = LIBRARY._work_dir(parent)
    (home / "checkpoints").mkdir(parents=True)
    save_config(apply_overrides(preset("tiny"), ["runtime.seed=0"]), home / "config.toml")
    (home / "meta.json").write_text(json.dumps({"status": "finished", "last_step": 6}))
    (home / "metrics.jsonl").write_text(json.dumps({"step": 1, "attempt": 1, "loss": 1.0}) + "\n")
    for name in ("init.pt", "step_0000003.pt", "step_0000003.pt.digest"):
        (home / "checkpoints" / name).write_bytes(name.encode())

    def broken(*args):
        raise AssertionError("the scheduler's process must not write the branch")

    monkeypatch.setattr(LIBRARY, "write_branch", broken)
    run = LIBRARY._branch(branch)
    cfg = load_config(run / "config.toml")
    assert (cfg.faults.collapse_weight, cfg.faults.start_step, cfg.logging.name) == (3.0, 3, branch.name)
    assert json.loads((run / "meta.json").read_text()) == {"status": "stopped", "last_step": 3}
    assert (run / "checkpoints" / "step_0000003.pt").read_bytes() == b"step_0000003.pt"
    assert not run.with_name(run.name + ".tmp").exists()
    (home / "config.toml").write_text("[rules]\nno_such_threshold = 1\n")  # a parent config that cannot load
    with pytest.raises(ValueError, match=r"small/collapse_3_at3_s0: branching from .* failed: .*no_such_threshold"):
        LIBRARY._branch(branch)


def test_training_is_resumable_parallel_and_runs_parents_first(tmp_path, monkeypatch):
    """The scheduler with a stand-in trainer: every case recorded once, branches only after their parent, a second
    call trains nothing, a failed parent blocks its branches and is reported."""
    import sys

    monkeypatch.setattr(LIBRARY, "WORK", tmp_path / "work")
    monkeypatch.setattr(LIBRARY, "LIBRARY", tmp_path / "library")
    order = tmp_path / "order.txt"

    def fake_command(case):
        run = LIBRARY._work_dir(case)
        status = "crashed" if case.seed == 1 and case.fault is None else "stopped" if case.fault else "finished"
        script = (
            "import json, pathlib, sys\n"
            f"run = pathlib.Path({str(run)!r}); run.mkdir(parents=True, exist_ok=True)\n"
            "(run / 'config.toml').write_text('[logging]\\nruns_dir = \"x\"\\n')\n"
            f"(run / 'metrics.jsonl').write_text(json.dumps({{'step': 0, 'attempt': 1, 'loss': 1.0}}) + '\\n')\n"
            f"(run / 'meta.json').write_text(json.dumps({{'status': {status!r}, 'last_step': {case.until()}}}))\n"
            f"open({str(order)!r}, 'a').write({case.key!r} + '\\n')\n"
            f"sys.exit({1 if status == 'crashed' else 0})\n")
        return [sys.executable, "-c", script], run

    monkeypatch.setattr(LIBRARY, "command", fake_command)
    monkeypatch.setattr(LIBRARY, "POLL_SECONDS", 0.05)
    cases = [c for c in LIBRARY.all_cases() if c.setting == "calib"][:5 + 6]  # 5 parents, 6 branches
    failures = LIBRARY.train(cases, jobs=3)
    trained = order.read_text().split()
    assert "calib/healthy_s1" in failures
    blocked = [c.key for c in cases if c.parent is not None and c.seed == 1]
    assert all(any(f.startswith(key) for f in failures) for key in blocked)
    for case in cases:
        if case.parent is not None and case.key in trained:
            assert trained.index(case.parent.key) < trained.index(case.key)
    recorded = {c.key for c in cases if LIBRARY.is_recorded(c)}
    assert recorded == {c.key for c in cases} - {"calib/healthy_s1", *blocked}
    order.write_text("")
    assert LIBRARY.train([c for c in cases if c.seed != 1], jobs=3) == [] and order.read_text() == ""
    # A fresh machine: the library is there, the work directory is not. A new branch retrains its parent first.
    import shutil

    branch = next(c for c in cases if c.parent is not None and c.seed != 1)
    shutil.rmtree(LIBRARY.WORK)
    shutil.rmtree(LIBRARY.record_dir(branch))
    assert LIBRARY.train([branch.parent, branch], jobs=2) == []
    assert order.read_text().split() == [branch.parent.key, branch.key] and LIBRARY.is_recorded(branch)


def test_a_rule_must_fire_on_a_case_made_for_it_somewhere_in_the_library(tmp_path, monkeypatch, capsys):
    # The requirement is the library's: a split may hold no case that a rule fires on (round 45's collapses drew no
    # rank_collapse) while the library as a whole does; one the whole library never fires on is named and fails.
    monkeypatch.setattr(DETECTION, "MADE_FOR", {"rank_collapse": ("collapse",)})

    def copy(name: str) -> None:
        shutil.copytree(LIBRARY.LIBRARY / name, tmp_path / name)
        index = LIBRARY.read_index(tmp_path / name.split("/")[0])
        index[name.split("/")[1]] = case_facts(LIBRARY.LIBRARY / name)
        (tmp_path / name.split("/")[0] / LIBRARY.CASES_INDEX).write_text(json.dumps(index))

    for name in ("noclip/healthy_s0", "noclip/collapse_0.37_at105_s0"):  # test split: harmful, no rank_collapse
        copy(name)
    assert DETECTION.main(["--library", str(tmp_path), "--split", "test"]) == 1
    assert "rule rank_collapse never fired on a case made for it" in capsys.readouterr().out
    tuned = next(d for d in RECORDED if d.parent.name == "calib" and d.name.startswith("collapse")
                 and DETECTION.judge(d).harmful and any(a.rule == "rank_collapse" for a in DETECTION.judge(d).alerts))
    copy(f"calib/{tuned.name}")
    copy(f"calib/healthy_s{case_facts(tuned)['seed']}")
    assert DETECTION.main(["--library", str(tmp_path), "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"rank_collapse\s+fires on\s+0 of\s+1 harmful collapse runs", out) and "targets met" in out


def test_a_study_of_the_labels_edge_takes_a_fraction_between_0_and_1(capsys):
    for bad in ("0", "1.5"):
        with pytest.raises(SystemExit) as exit_info:
            DETECTION.main(["--collapse-fraction", bad])
        assert exit_info.value.code == 2
        assert f"--collapse-fraction must lie between 0 and 1, not {float(bad)}" in capsys.readouterr().err


def test_the_real_image_families_of_a_split_are_judged_after_the_shapes(capsys):
    import real_split

    for split in ("tune", "test"):
        failed = DETECTION.real_families(split)
        out = capsys.readouterr().out
        printed = set(re.findall(r"REAL IMAGES, (\w+) \((\w+)\)", out))
        assert printed == {(family, split) for family, s in real_split.FAMILIES.items() if s == split}
        # a family that misses a target is named in what counts toward the exit code
        assert all(any(f"family {family}" in line for family, _ in printed) for line in failed)
    DETECTION.real_families("both")
    assert {f for f, _ in re.findall(r"REAL IMAGES, (\w+) \((\w+)\)", capsys.readouterr().out)} == set(real_split.FAMILIES)
