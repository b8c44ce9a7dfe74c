"""Your own training loop, watched (issue 47): examples/own_loop.py, a plain-PyTorch JEPA loop that imports nothing
of our trainer, step or model, writes through jepa_core.monitor a run directory that passes the stream contract of
a `jepa train` run, that `jepa doctor` judges, and whose planted failure draws the alert our trainer draws."""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from jepa_core.config import apply_overrides, preset
from jepa_core.metrics import registry
from jepa_core.metrics.reader import read_metrics
from jepa_core.run.trainer import Trainer
from jepa_core.workbench.doctor import diagnose

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "own_loop.py"
NAMES = {m.name for m in registry.METRICS}


def run_example(folder: Path, *args: str) -> Path:
    done = subprocess.run([sys.executable, str(EXAMPLE), *args], cwd=folder, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    name = args[args.index("--name") + 1]
    return folder / "runs" / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("own")
    run_example(folder, "--steps", "300", "--name", "healthy")
    run_example(folder, "--steps", "300", "--name", "ema-zero", "--ema-zero-from", "150")
    return folder / "runs"


def assert_stream_contract(run: Path) -> None:
    """What every stream of this project holds: strict JSON lines with integer step and attempt, registered metric
    names, alerts on a metric their rule reads, one value per (step, metric), readable without bad lines."""
    seen: set[tuple[int, str]] = set()
    for number, line in enumerate((run / "metrics.jsonl").read_text(encoding="utf-8").splitlines(), start=1):
        row = json.loads(line, parse_constant=lambda token: pytest.fail(f"line {number}: bare {token}"))
        assert type(row["step"]) is int and type(row["attempt"]) is int, number
        if row.get("event") == "alert":
            assert row["metric"] in registry.read_by(row["rule"]), (number, row["rule"])
        elif "event" not in row:
            names = set(row) - {"step", "attempt"}
            assert names <= NAMES, (number, sorted(names - NAMES))
            for name in names:
                assert (row["step"], name) not in seen, (number, name)
                seen.add((row["step"], name))
    table = read_metrics(run / "metrics.jsonl")
    assert table.bad_lines == [] and not table.scalars.empty


def test_the_example_is_not_our_trainer():
    tree = ast.parse(EXAMPLE.read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("jepa_core") for alias in node.names}
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"make_shapes", "JEPAMonitor"}, imported
    assert not modules & {"jepa_core.run.trainer", "jepa_core.method.step", "jepa_core.method.model"}
    monitor_lines = [ln for ln in EXAMPLE.read_text(encoding="utf-8").splitlines() if "# [monitor]" in ln]
    assert 4 <= len(monitor_lines) <= 8  # the lines a user adds to a loop they already have


def test_the_watched_loop_writes_a_run_every_view_reads(runs):
    run = runs / "healthy"
    assert_stream_contract(run)
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["last_step"] == 300 and meta["writer"] == "jepa_core.monitor"
    assert set(meta["not_measured"]) == {"health/gns", "target/lidar"}  # after_backward was called
    report = diagnose(run, check_checkpoints=True)
    assert report.verdict == "healthy" and report.status == "finished"
    frame = read_metrics(run / "metrics.jsonl").scalars
    for group in ("basic", "representation", "fixed_batch", "covariance", "param_distance", "mask_check",
                  "weights_health"):
        required = {m.name for m in registry.in_group(group) if not m.when} - {"time/data_seconds"}
        assert required <= set(frame.columns), (group, sorted(required - set(frame.columns)))
    evaluated = frame.dropna(subset=["knn/accuracy"])
    assert evaluated["step"].tolist() == [0, 100, 200, 300]  # the random-init reading and the cadence
    assert evaluated["knn/accuracy_noise"].notna().tolist() == [True, False, False, False]
    assert (frame.dropna(subset=["mask/overlap_fraction"])["mask/overlap_fraction"] == 0).all()


def test_a_planted_failure_in_the_loop_draws_the_alert_our_trainer_draws(runs, tmp_path):
    """EMA momentum 0 from step 150 in the user's loop, and the same fault (target_copies_online) in our trainer on
    the same sizes and cadences: the same critical alert, at a comparable step (within one reading)."""
    watched = [a for a in diagnose(runs / "ema-zero").alerts if a.severity == "critical"]
    assert watched and watched[0].rule == "ema_stalled" and 150 < watched[0].step <= 170
    assert diagnose(runs / "healthy").alerts == []
    sizes = ["model.img_size=32", "model.patch_size=4", "model.embed_dim=64", "model.depth=2", "model.num_heads=4",
             "model.pred_dim=32", "model.pred_depth=1", "optim.batch_size=32",
             "optim.warmup_steps=30", "data.num_train=4096", "eval.at_start=false", "eval.artifacts=false",
             "diagnostics.eval_every_steps=1000", "diagnostics.basic_every_steps=10",
             "diagnostics.representation_every_steps=10", "diagnostics.fixed_batch_every_steps=10",
             "diagnostics.mask_check_every_steps=10", "diagnostics.covariance_every_steps=20",
             "diagnostics.param_distance_every_steps=20", "diagnostics.weights_health_every_steps=50",
             "logging.tensorboard=false", "logging.progress_bar=false", "runtime.num_threads=1",
             "faults.target_copies_online=true", "faults.start_step=150", "optim.steps=200",
             f"logging.runs_dir={json.dumps(str(tmp_path))}"]
    trainer = Trainer(apply_overrides(preset("tiny"), sizes), run_dir=tmp_path / "ours", quiet=True)
    trainer.run()
    assert_stream_contract(tmp_path / "ours")  # the contract is the one `jepa train` streams keep
    ours = [a for a in trainer.rules.alerts if a.severity == "critical"]
    assert ours and ours[0].rule == watched[0].rule
    assert abs(ours[0].step - watched[0].step) <= 20  # param_distance_every_steps


def test_the_monitor_off_writes_nothing(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLE), "--steps", "5", "--name", "off", "--no-monitor"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_torchrun_two_processes_write_one_stream_from_rank_0(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(EXAMPLE),
           "--steps", "60", "--name", "ddp"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["ddp"]
    meta = json.loads((tmp_path / "runs" / "ddp" / "meta.json").read_text())
    assert meta["world_size"] == 2 and meta["status"] == "finished"
    assert_stream_contract(tmp_path / "runs" / "ddp")
    frame = read_metrics(tmp_path / "runs" / "ddp" / "metrics.jsonl").scalars
    rows = frame.dropna(subset=["loss"])
    assert rows["step"].tolist() == [10, 20, 30, 40, 50, 60]  # one row a step: rank 1 wrote none
    assert set(rows["global_batch_size"]) == {64.0} and all(math.isfinite(v) for v in rows["loss"])
