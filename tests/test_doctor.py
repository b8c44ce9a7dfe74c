"""`jepa doctor`: verdicts and exit codes on constructed metric files."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from jepa_core.doctor import DoctorReport, UnreadableRunError, diagnose, doctor_main, format_report
from jepa_core.rules import RulesConfig
from jepa_core.stream import encode_row


def healthy_rows(seed: int = 0, steps: int = 200, mutate: Callable[[int, dict], None] | None = None) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for step in range(0, steps + 1, 5):
        row = {"step": step, "attempt": 0, "loss": (0.3 + 0.7 * math.exp(-step / 80)) * (1 + rng.gauss(0, 0.03)),
               "grad_norm": math.exp(rng.gauss(0, 0.1)), "ema_tau": 0.996 + 0.004 * step / steps,
               "mask/overlap_fraction": 0.0, "target/std_mean": 0.5 * (1 + rng.gauss(0, 0.03)),
               "target/std_l2n": 0.12 * (1 + rng.gauss(0, 0.03)), "time/samples_per_second": 100.0 + step,
               "time/eta_seconds": float(steps - step), "time/step_seconds": 0.5}
        if step % 10 == 0:
            row["target/token_effective_rank"] = 40.0 * (1 - 0.2 * step / steps) * (1 + rng.gauss(0, 0.03))
        if mutate is not None:
            mutate(step, row)
        rows.append(row)
    return rows


def write_run(tmp_path: Path, rows: list[dict], tail: str = "", name: str = "run") -> Path:
    run = tmp_path / name
    run.mkdir()
    text = "".join(encode_row(r) + "\n" for r in rows) + tail
    (run / "metrics.jsonl").write_text(text)
    return run


def strict_json(text: str) -> dict:
    def reject(token: str) -> None:
        raise ValueError(f"non-strict JSON token {token}")

    return json.loads(text, parse_constant=reject)


def test_healthy_run_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, healthy_rows())
    report = diagnose(run)
    assert report.verdict == "healthy" and report.alerts == [] and report.exit_code == 0
    assert doctor_main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "verdict: HEALTHY (no alerts)" in out and "target/token_effective_rank" in out


def test_warning_run_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def shrink_tau(step: int, row: dict) -> None:
        if step >= 100:
            row["ema_tau"] = 0.99

    run = write_run(tmp_path, healthy_rows(mutate=shrink_tau))
    assert doctor_main([str(run)]) == 1
    out = capsys.readouterr().out
    assert "verdict: WARNING" in out and "ema_schedule" in out and "step     100" in out


def test_critical_run_exits_1_and_lists_the_runbook_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def leak(step: int, row: dict) -> None:
        if step >= 50:
            row["mask/overlap_fraction"] = 0.25

    run = write_run(tmp_path, healthy_rows(mutate=leak))
    report = diagnose(run / "metrics.jsonl")  # a metrics file works as well as a run directory
    assert report.verdict == "critical"
    assert [(a.rule, a.step) for a in report.alerts] == [("mask_leak", 50)]
    assert doctor_main([str(run)]) == 1
    assert "mask collator" in capsys.readouterr().out


def test_nan_loss_written_as_string_is_critical(tmp_path: Path) -> None:
    def nan(step: int, row: dict) -> None:
        if step == 150:
            row["loss"] = math.nan

    run = write_run(tmp_path, healthy_rows(mutate=nan))
    assert '"loss":"NaN"' in (run / "metrics.jsonl").read_text()
    report = diagnose(run)
    assert report.verdict == "critical" and [(a.rule, a.step) for a in report.alerts] == [("non_finite", 150)]


def test_recorded_alerts_are_merged_and_deduplicated(tmp_path: Path) -> None:
    def leak(step: int, row: dict) -> None:
        if step >= 50:
            row["mask/overlap_fraction"] = 0.25

    rows = healthy_rows(mutate=leak)
    live = [{"step": 50, "attempt": 0, "event": "alert", "rule": "mask_leak", "severity": "critical",
             "metric": "mask/overlap_fraction", "value": 0.25, "message": "recorded live"},
            {"step": 120, "attempt": 0, "event": "alert", "rule": "dead_dimensions", "severity": "warning",
             "metric": "target/dead_dim_fraction", "value": 0.4, "message": "from an older threshold"}]
    report = diagnose(write_run(tmp_path, rows[:11] + live[:1] + rows[11:] + live[1:]))
    assert [(a.rule, a.step, a.message) for a in report.alerts] == [
        ("mask_leak", 50, "recorded live"), ("dead_dimensions", 120, "from an older threshold")]
    assert report.verdict == "critical"


def test_info_alerts_alone_keep_the_run_healthy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    info = {"step": 60, "attempt": 0, "event": "alert", "rule": "note", "severity": "info", "metric": "loss",
            "value": 0.5, "message": "just so you know"}
    run = write_run(tmp_path, healthy_rows() + [info])
    assert doctor_main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "HEALTHY (1 info alert)" in out and "info alerts alone do not make a run unhealthy" in out


def test_json_output_is_strict_and_complete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def nan(step: int, row: dict) -> None:
        if step == 150:
            row["grad_norm"] = math.nan

    run = write_run(tmp_path, healthy_rows(mutate=nan))
    assert doctor_main([str(run), "--json"]) == 1
    payload = strict_json(capsys.readouterr().out)
    assert payload["verdict"] == "critical" and payload["exit_code"] == 1
    assert payload["alerts"][0]["rule"] == "non_finite" and payload["alerts"][0]["value"] == "NaN"
    assert payload["key_metrics"]["steps"] == {"first": 0, "last": 200, "rows": 41}


def test_key_metrics_trends_throughput_and_torn_lines(tmp_path: Path) -> None:
    run = write_run(tmp_path, healthy_rows(), tail='{"step": 205, "loss": 0.')
    km = diagnose(run).key_metrics
    assert km["torn_lines"] == 1 and km["bad_lines"] == 0
    loss = km["metrics"]["loss"]
    assert loss["trend"] == "falling" and loss["relative_change"] < -0.5 and loss["readings"] == 41
    assert km["metrics"]["mask/overlap_fraction"]["trend"] == "flat"
    assert km["metrics"]["ema_tau"]["trend"] == "flat"  # +0.4% is within the flat band
    assert km["throughput"]["samples_per_second_last"] == 300.0
    assert km["throughput"]["samples_per_second_median"] == 200.0
    assert km["throughput"]["eta_seconds_last"] == 0.0
    text = format_report(diagnose(run))
    assert "1 torn" in text and "300 samples/s" in text


def test_rules_config_is_passed_through(tmp_path: Path) -> None:
    def leak(step: int, row: dict) -> None:
        row["mask/overlap_fraction"] = 0.01

    run = write_run(tmp_path, healthy_rows(mutate=leak))
    assert diagnose(run).verdict == "critical"
    assert diagnose(run, RulesConfig(mask_leak_max_overlap=0.05)).verdict == "healthy"


@pytest.mark.parametrize("case", ["missing", "no_metrics_in_dir", "empty", "garbage", "only_torn"])
def test_unreadable_runs_exit_2_naming_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                case: str) -> None:
    target = tmp_path / "run"
    if case != "missing":
        target.mkdir()
    contents = {"empty": "", "garbage": "this is not json\n\x00\x01 neither is this\n[1, 2]\n",
                "only_torn": '{"step": 3, "lo'}
    if case in contents:
        (target / "metrics.jsonl").write_text(contents[case])
    assert doctor_main([str(target)]) == 2
    captured = capsys.readouterr()
    assert str(target) in captured.err and captured.out == ""
    with pytest.raises(UnreadableRunError, match="run"):
        diagnose(target)


def test_garbage_message_names_the_first_bad_line(tmp_path: Path) -> None:
    run = write_run(tmp_path, [], tail="nope\nstill nope\n")
    with pytest.raises(UnreadableRunError, match=r"line 1"):
        diagnose(run)


def test_cli_dispatches_to_the_doctor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jepa_core.cli import main

    assert main(["doctor", str(write_run(tmp_path, healthy_rows()))]) == 0
    assert "HEALTHY" in capsys.readouterr().out


def test_report_dataclass_round_trip() -> None:
    report = DoctorReport(run="x", verdict="warning")
    assert report.exit_code == 1 and report.to_dict()["alerts"] == []
    assert "WARNING (no alerts)" in format_report(report)


def test_rows_orphaned_by_a_resume_are_not_judged(tmp_path: Path) -> None:
    def nan_late(step: int, row: dict) -> None:
        if step == 150:
            row["loss"] = math.nan

    first = [r for r in healthy_rows(mutate=nan_late) if r["step"] <= 160]  # attempt 0 crashed after a NaN
    resumed = [{**r, "attempt": 1} for r in healthy_rows(seed=1) if r["step"] >= 100]  # resumed from step 100
    report = diagnose(write_run(tmp_path, first + resumed))
    assert report.verdict == "healthy" and report.alerts == []
    assert report.key_metrics["steps"]["last"] == 200
