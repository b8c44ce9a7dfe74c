"""Rewind from an alert (issue 46): `jepa rewind` branches a run from the checkpoint before an alert with the fault
switched off, and the branch continues exactly as a run that never had the fault; the parent is only read; bad
changes are refused before anything exists; the trainer keeps the checkpoint worth rewinding to."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from jepa_core.alerts.windows import OWN_WINDOWS, rewind_reserve, rewind_step_before, \
    rule_window_steps
from jepa_core.cli import main as jepa
from jepa_core.config import RulesConfig, apply_overrides, preset
from jepa_core.metrics import registry
from jepa_core.run.branch import lineage
from jepa_core.run.checkpoint import load_checkpoint, prune_checkpoints
from jepa_core.run.rundir import load_run_config, read_meta
from jepa_core.workbench.doctor import diagnose
from test_train import deterministic_rows

# A model small enough for 70 steps in two seconds; diagnostics every 5 steps, checkpoints every 10 (one kept), rules
# awake from step 10. Healthy, this run draws no alert (asserted below); lr x30 from step 40 draws an ema_runaway.
SMALL = [
    "model.img_size=16", "model.embed_dim=32", "model.depth=1", "model.num_heads=2", "model.pred_dim=16",
    "model.pred_depth=1", "model.pred_num_heads=2", "masks.num_targets=2", "optim.steps=70", "optim.batch_size=8",
    "optim.warmup_steps=5", "data.num_train=64", "data.num_heldout=40", "eval.probe_epochs=2", "eval.noise_splits=2",
    "eval.lidar_images=32", "eval.artifacts=false", "logging.tensorboard=false", "logging.progress_bar=false",
    "runtime.num_threads=1", "runtime.device='cpu'", "diagnostics.basic_every_steps=5",
    "diagnostics.representation_every_steps=5", "diagnostics.fixed_batch_every_steps=5",
    "diagnostics.mask_check_every_steps=5", "diagnostics.covariance_every_steps=50",
    "diagnostics.param_distance_every_steps=50", "diagnostics.weights_health_every_steps=50",
    "diagnostics.eval_every_steps=1000", "logging.checkpoint_every_steps=10", "logging.keep_checkpoints=1",
    "rules.settle_readings=2", "rules.divergence_settle_fraction=0.14",
]
FAULT = ["faults.start_step=40", "faults.lr_blowup_factor=30.0"]


def sets(items: list[str]) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def train(runs: Path, name: str, *extra: str) -> Path:
    args = ["train", "--quiet", "--name", name, *sets(SMALL + [f"logging.runs_dir={json.dumps(str(runs))}", *extra])]
    assert jepa(args) == 0
    return runs / name


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A healthy run and the same run with lr x30 from step 40 (its parent), each trained once for the module."""
    runs = tmp_path_factory.mktemp("runs")
    train(runs, "healthy")
    train(runs, "blown", *FAULT)
    return runs


def test_the_healthy_twin_is_healthy_and_the_fault_draws_an_alert(runs):
    assert diagnose(runs / "healthy").alerts == []
    alerts = diagnose(runs / "blown").alerts
    assert [(a.rule, a.step) for a in alerts] == [("ema_runaway", 45)]


def test_the_trainer_keeps_the_checkpoint_before_the_alert_past_keep_checkpoints(runs):
    meta = read_meta(runs / "blown")
    assert meta["kept_checkpoints"] == [{"step": 30, "file": "checkpoints/step_0000030.pt",
                                         "why": "the checkpoint before the ema_runaway warning at step 45"}]
    assert (runs / "blown" / "checkpoints" / "step_0000030.pt").is_file()
    assert "kept_checkpoints" not in read_meta(runs / "healthy")


def test_pruning_spares_the_kept_checkpoints(tmp_path):
    for step in (10, 20, 30, 40):
        (tmp_path / f"step_{step:07d}.pt").write_bytes(b"x")
    prune_checkpoints(tmp_path, keep_last=1, keep_steps=frozenset({20}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_0000020.pt", "step_0000040.pt"]


def test_the_trainer_holds_the_checkpoints_a_coming_alert_may_rewind_to(runs):
    """keep_checkpoints=1, yet the 70-step run keeps all seven: its longest rule window (one evaluation interval,
    1,000 steps) reaches past its first checkpoint, so an alert at its last step could need any of them."""
    kept = sorted(int(p.name[5:12]) for p in (runs / "healthy" / "checkpoints").glob("step_*.pt"))
    assert kept == [10, 20, 30, 40, 50, 60, 70]


def test_rewind_from_the_alert_with_the_fault_off_equals_the_run_without_it(runs, capsys):
    parent = runs / "blown"
    before = digests(parent)
    assert jepa(["rewind", str(parent), "--alert", "1", "--quiet", "--set", "faults.lr_blowup_factor=1.0"]) == 0
    err = capsys.readouterr().err
    branch = runs / "blown-from-30"
    assert f"branched {branch} from {parent} at step 30" in err
    assert "newest intact checkpoint at least 10 steps (its window) before it" in err
    assert digests(parent) == before  # the parent is only read: not its stream, lock, meta or checkpoints

    # Every row, the step-0 and pre-branch rows copied from the parent and those trained after it, equals the run
    # that never had the fault (timings aside): the same batches, masks and state; bit-identical floats on CPU.
    healthy = deterministic_rows(runs / "healthy" / "metrics.jsonl")
    branched = deterministic_rows(branch / "metrics.jsonl")
    assert list(branched.columns) == list(healthy.columns)
    assert branched.equals(healthy)
    assert branched["step"].max() == 70

    report = diagnose(branch)
    assert report.verdict == "healthy" and report.status == "finished"
    meta = read_meta(branch)
    assert lineage(meta) == {"run": "blown", "path": str(parent.resolve()), "step": 30,
                             "checkpoint": "step_0000030.pt", "changes": {"faults.lr_blowup_factor": 1.0},
                             "why": "alert 1 (ema_runaway warning at step 45): the newest intact checkpoint at least "
                                    "10 steps (its window) before it"}
    assert meta["faults"] == [] and meta["attempt"] == 2


def refused(runs: Path, capsys, *args: str) -> str:
    before = sorted(p.name for p in runs.iterdir())
    assert jepa(["rewind", str(runs / "blown"), *args]) == 2
    assert sorted(p.name for p in runs.iterdir()) == before  # nothing created
    return capsys.readouterr().err


@pytest.mark.parametrize("args, words", [
    (["--to", "25"], "has no intact checkpoint of step 25 (intact checkpoints: 10, 20, 30, 40, 50, 60, 70; 0 "),
    (["--to", "30", "--set", "model.embed_dim=64"], "--set model.embed_dim: cannot change in a rewind"),
    (["--to", "30", "--set", "data.num_train=128"], "--set data.num_train: cannot change in a rewind"),
    (["--to", "30", "--set", "faults.target_gradients=true"], "--set faults.target_gradients: cannot change"),
    (["--to", "30", "--set", "logging.name='x'"], "name the branch with --name"),
    (["--to", "30", "--set", "optim.steps=30"], "optim.steps 30 leaves nothing to train after step 30"),
    (["--to", "30", "--set", "optim.lr=-1.0"], "optim.lr"),
    (["--to", "30", "--name", "healthy"], "run directory"),
])
def test_bad_rewinds_are_refused_before_anything_is_created(runs, capsys, args, words):
    assert words in refused(runs, capsys, *args)


def test_alert_numbers_are_checked_against_the_run(runs, capsys):
    assert "has 1 alert(s); number them from 1" in refused(runs, capsys, "--alert", "2")


def test_a_branch_made_without_training_resumes_with_its_changes(runs, capsys):
    assert jepa(["rewind", str(runs / "blown"), "--to", "30", "--no-train", "--name", "betas",
                 "--set", "optim.beta2=0.99", "--set", "optim.lr=2e-4"]) == 0
    assert "jepa train --resume" in capsys.readouterr().out
    branch = runs / "betas"
    meta = read_meta(branch)
    assert meta["status"] == "stopped" and meta["last_step"] == 30
    assert lineage(meta)["changes"] == {"optim.lr": 2e-4, "optim.beta2": 0.99}
    assert load_run_config(branch).faults.lr_blowup_factor == 30.0  # only what was asked changes
    assert jepa(["train", "--quiet", "--resume", str(branch), "--until", "40"]) == 0
    state = load_checkpoint(branch / "checkpoints" / "step_0000040.pt")
    assert {tuple(g["betas"]) for g in state["optimizer"]["param_groups"]} == {(0.9, 0.99)}


def test_rewind_to_step_zero_starts_from_the_initial_weights(runs, capsys):
    assert jepa(["rewind", str(runs / "blown"), "--to", "0", "--no-train", "--set", "faults.lr_blowup_factor=1.0"]) == 0
    branch = runs / "blown-from-0"
    assert not (branch / "metrics.jsonl").exists() and not list((branch / "checkpoints").iterdir())
    assert lineage(read_meta(branch))["checkpoint"] is None


# ------------------------------------------------------------------------------------------------ windows
def test_every_window_setting_belongs_to_a_rule():
    windows = {f.name for f in dataclasses.fields(RulesConfig)
               if f.name.endswith("_readings") and ("window" in f.name or "recent" in f.name)}
    claimed = {name for names in OWN_WINDOWS.values() for name in names}
    assert windows and claimed == windows
    assert set(OWN_WINDOWS) <= set(registry.rules())


def test_a_rule_window_is_its_own_window_or_one_interval_of_the_metric_that_fired():
    cfg = apply_overrides(preset("tiny"), ["diagnostics.eval_every_steps=400", "diagnostics.basic_every_steps=10",
                                           "diagnostics.param_distance_every_steps=50"])
    assert rule_window_steps("eval_regression", cfg.rules, cfg.diagnostics, "knn/accuracy") == 400
    assert rule_window_steps("steady_collapse", cfg.rules, cfg.diagnostics) == 10 * cfg.rules.steady_window_readings
    assert rule_window_steps("ema_runaway", cfg.rules, cfg.diagnostics, "ema/relative_param_l2") == 50
    assert rule_window_steps("ema_runaway", cfg.rules, cfg.diagnostics, "ema/fixed_batch_distance") == \
        max(20, cfg.diagnostics.fixed_batch_every_steps)
    assert rule_window_steps("a_rule_from_the_future", cfg.rules, cfg.diagnostics) == 20


def test_the_rewind_point_and_the_reserve():
    assert rewind_step_before(345, 45, [100, 200, 300, 340]) == 300
    assert rewind_step_before(40, 45, [10, 20]) is None
    cfg = preset("tiny")
    reserve = rewind_reserve(1000, [200, 400, 600, 800, 1000], cfg.rules, cfg.diagnostics)
    longest = max(rule_window_steps(r, cfg.rules, cfg.diagnostics) for r in registry.rules())
    assert min(reserve) == max(s for s in (200, 400, 600, 800, 1000) if s <= 1000 - longest)
    assert rewind_reserve(10, [10], cfg.rules, cfg.diagnostics) == frozenset({10})


# ------------------------------------------------------------------------------------------------ the workbench
def test_rewind_here_branches_from_the_alert_row_and_follows_the_detached_branch(runs, tmp_path):
    """What the workbench's "rewind here" does with a row of the alert table and the form's values."""
    from jepa_core.workbench.plan import REWIND_KEYS, rewind_defaults
    from jepa_core.workbench.session import TrainingSession
    from test_session import killed_if_left

    parent = runs / "blown"
    form = rewind_defaults(parent)
    assert set(form) == set(REWIND_KEYS) and form["faults.lr_blowup_factor"] == 30.0
    form["faults.lr_blowup_factor"] = 1.0
    alert = {"step": 45, "severity": "warning", "rule": "ema_runaway", "metric": "ema/fixed_batch_distance"}
    session = TrainingSession(roots=[runs], poll_every=0.1)
    try:
        assert session.rewind(parent, {**alert, "step": 46}, form, "nope").startswith(
            f"Could not rewind: {parent} has no warning ema_runaway alert at step 46")
        said = session.rewind(parent, alert, form, "from-the-table")
        assert said.startswith("Rewound blown to step 30 as from-the-table (faults.lr_blowup_factor = 1.0): pid ")
        launched = session.state.launched
        with killed_if_left(launched):
            assert session.wait(120) and launched.process.wait(60) == 0
        assert session.view().status == "finished" and session.view().run_dir == runs / "from-the-table"
    finally:
        session.close()
    healthy = deterministic_rows(runs / "healthy" / "metrics.jsonl")
    assert deterministic_rows(runs / "from-the-table" / "metrics.jsonl").equals(healthy)
    assert not (runs / "nope").exists()
