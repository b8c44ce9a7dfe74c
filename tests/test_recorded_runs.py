"""The recorded runs of the detection benchmark (data/runs/<name>/): `jepa doctor` gives each its expected verdict.

They are committed so that notebooks, tests and new users can open real runs without training; the benchmark
(`python benchmarks/demo_runs.py --record`) writes them. A healthy run must come out healthy (exit 0) under the
current rules, each fault run must raise alerts (exit 1) including the rule that names its fault.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest

from benchmark_util import load_benchmark
from jepa_core.config import apply_overrides, config_to_dict, load_config, preset
from jepa_core.workbench.doctor import EXIT_ALERTS, EXIT_HEALTHY, doctor_main, run_facts
from jepa_core.metrics.reader import read_metrics

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "data" / "runs"
MAX_TOTAL_BYTES = 4 * 1024 * 1024  # "a few MB in all"



BENCHMARK = load_benchmark("demo_runs")
CASES = BENCHMARK.cases(3)
HEALTHY = [c for c in CASES if c.fault is None]
FAULTS = [c for c in CASES if c.fault is not None]


# Recorded by benchmarks/tiny_learns.py --record: the default preset's full-length run.
TINY_DEFAULT = RUNS / "tiny-default"


@pytest.mark.parametrize("run", sorted(p.name for p in RUNS.iterdir() if (p / "metrics.jsonl").is_file()))
def test_each_recorded_run_carries_the_alerts_the_current_rules_raise(run):
    # A rule change must be followed by `python benchmarks/demo_runs.py --rederive`: `jepa doctor` and the monitor
    # merge a run's recorded alert rows with fresh ones, and a stale severity would read as a different verdict.
    rows = [json.loads(line) for line in (RUNS / run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert BENCHMARK.live_alerts(rows) == BENCHMARK.current_alerts(rows, run_facts(RUNS / run)), run


def test_every_benchmark_run_is_recorded():
    recorded = sorted(p.name for p in RUNS.iterdir() if p.is_dir())
    assert sorted([c.name for c in CASES] + [TINY_DEFAULT.name]) == recorded


def test_full_length_default_run_raises_no_alert():
    # The default preset's whole run, at a batch size and length the thresholds were not tuned on: still no alert.
    assert doctor_main([str(TINY_DEFAULT)]) == EXIT_HEALTHY
    recorded = load_config(TINY_DEFAULT / "config.toml")
    default = preset("tiny")
    for section in ("model", "data", "masks", "optim", "ema"):  # the recording is of today's preset
        assert getattr(recorded, section) == getattr(default, section), section
    steps = read_metrics(TINY_DEFAULT / "metrics.jsonl").scalars["step"]
    assert steps.min() == 0 and steps.max() == default.optim.steps  # the whole run was judged
    # Whether the preset learns is measured by training it: benchmarks/tiny_learns.py, not by a stored number.


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_recorded_run_is_thinned_and_complete(case):
    run = RUNS / case.name
    assert {p.name for p in run.iterdir()} <= {"config.toml", "meta.json", "metrics.jsonl", "artifacts"}
    for name in ("config.toml", "meta.json", "metrics.jsonl"):
        assert (run / name).is_file(), f"{run / name} missing"
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "finished"
    assert meta["faults"] == ([case.fault] if case.fault else [])
    pngs = list((run / "artifacts").glob("*.png"))
    assert 1 <= len(pngs) <= 2


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_recorded_run_matches_what_the_benchmark_would_train_now(case):
    # A preset change that moves the detection runs must come with a re-recording (the thresholds were tuned on
    # these streams). Allowed to differ: where the run was written, and the rule thresholds, which `jepa doctor`
    # and the benchmark apply as they are today rather than as they were when the run was trained.
    args = argparse.Namespace(steps=300, fault_step=100, eval_every=25)
    expected = config_to_dict(apply_overrides(preset("tiny"), [*BENCHMARK.common_overrides(args), *case.overrides]))
    recorded = config_to_dict(load_config(RUNS / case.name / "config.toml"))
    for cfg in (expected, recorded):
        cfg.pop("rules")
        cfg["logging"].pop("runs_dir")
        cfg["logging"].pop("name")
    assert recorded == expected


def test_recorded_runs_stay_small():
    total = sum(p.stat().st_size for p in RUNS.rglob("*") if p.is_file())
    assert total < MAX_TOTAL_BYTES


@pytest.mark.parametrize("case", HEALTHY, ids=lambda c: c.name)
def test_doctor_calls_healthy_runs_healthy(case, capsys):
    code = doctor_main([str(RUNS / case.name), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["verdict"], report["alerts"]) == (EXIT_HEALTHY, "healthy", [])


@pytest.mark.parametrize("case", FAULTS, ids=lambda c: c.name)
def test_doctor_flags_each_fault_with_its_rule(case, capsys):
    code = doctor_main([str(RUNS / case.name), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == EXIT_ALERTS and report["verdict"] in ("warning", "critical")
    fired = {a["rule"] for a in report["alerts"]}
    assert case.expected_rule in fired, f"{case.name}: {sorted(fired)}"
    fault_step = int(_config_value(RUNS / case.name / "config.toml", "faults", "start_step"))
    # Every alert comes after the fault began: the healthy stretch before it raises nothing.
    assert min(a["step"] for a in report["alerts"]) > fault_step


def test_console_script_exit_codes():
    """`jepa doctor` as a user types it: 0 on a healthy recorded run, 1 on a faulty one."""
    healthy = subprocess.run(["jepa", "doctor", str(RUNS / HEALTHY[0].name)], capture_output=True, text=True)
    assert healthy.returncode == EXIT_HEALTHY, healthy.stdout + healthy.stderr
    faulty = subprocess.run(["jepa", "doctor", str(RUNS / "fault_mask_leak")], capture_output=True, text=True)
    assert faulty.returncode == EXIT_ALERTS and "mask_leak" in faulty.stdout


def _config_value(path: Path, section: str, key: str):
    import tomllib

    return tomllib.loads(path.read_text())[section][key]


def test_demo_recording_thins_a_run_and_rederives_stale_alerts(tmp_path):
    bench = BENCHMARK
    run = tmp_path / "runs" / "fault_x"
    (run / "checkpoints").mkdir(parents=True)
    (run / "tensorboard").mkdir()
    (run / "artifacts").mkdir()
    (run / "checkpoints" / "latest.pt").write_bytes(b"weights")
    (run / "config.toml").write_text('[logging]\nruns_dir = "/tmp/xyz"\nname = "fault_x"\n')
    (run / "meta.json").write_text('{"status": "finished"}')
    for kind in ("masks", "neighbours"):
        for step in (25, 50):
            (run / "artifacts" / f"{kind}_step{step:07d}.png").write_bytes(b"png")
            (run / "artifacts" / f"{kind}_step{step:07d}.json").write_text("{}")
    rows = [{"step": s, "attempt": 1, "mask/overlap_fraction": 0.3 if s >= 60 else 0.0} for s in range(0, 100, 10)]
    stale = {"step": 40, "attempt": 1, "event": "alert", "rule": "rank_collapse", "severity": "warning",
             "metric": "target/effective_rank", "value": 1.0, "message": "old threshold"}
    lines = [json.dumps(r) for r in rows[:5]] + [json.dumps(stale)] + [json.dumps(r) for r in rows[5:]]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")

    dest = bench.record(run, tmp_path / "data")
    assert sorted(p.name for p in dest.iterdir()) == ["artifacts", "config.toml", "meta.json", "metrics.jsonl"]
    assert sorted(p.name for p in (dest / "artifacts").iterdir()) == [
        "masks_step0000050.json", "masks_step0000050.png", "neighbours_step0000050.json",
        "neighbours_step0000050.png"]
    assert 'runs_dir = "data/runs"' in (dest / "config.toml").read_text()
    recorded = [json.loads(line) for line in (dest / "metrics.jsonl").read_text().splitlines()]
    alerts = [(r["step"], r["rule"]) for r in recorded if r.get("event") == "alert"]
    assert alerts == [(60, "mask_leak")]
    first_alert = next(i for i, r in enumerate(recorded) if r.get("event") == "alert")
    assert recorded[first_alert - 1] == rows[6]  # written right after the row that raised it
