"""`jepa doctor`: verdicts and exit codes on constructed metric files."""

from __future__ import annotations

import gzip
import io
import json
import math
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from jepa_core.common.console import EXIT_BROKEN_PIPE, exit_quietly_on_broken_pipe
from jepa_core.common.console import terminal_safe
from jepa_core.workbench.doctor import DoctorReport, UnreadableRunError, diagnose, doctor_main, format_report
from jepa_core.config import RulesConfig
from jepa_core.metrics.stream import encode_row


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
    def lr_jump(step: int, row: dict) -> None:  # the optimizer's steps grow tenfold at step 100: a warning
        if step % 10 == 0:
            row["health/update_ratio"] = 1e-3 * (10.0 if step >= 100 else 1.0)

    run = write_run(tmp_path, healthy_rows(mutate=lr_jump))
    assert doctor_main([str(run)]) == 1
    out = capsys.readouterr().out
    assert "verdict: WARNING" in out and "divergence" in out and "step     1" in out


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


def test_a_warning_and_a_critical_alert_of_one_rule_at_one_step_are_both_kept(tmp_path: Path) -> None:
    live = [{"step": 160, "attempt": 0, "event": "alert", "rule": "ema_stalled", "severity": severity,
             "metric": metric, "value": 0.0, "message": f"recorded live: {severity}"}
            for severity, metric in (("warning", "ema_tau"), ("critical", "ema/relative_param_l2"))]
    report = diagnose(write_run(tmp_path, healthy_rows() + live))
    assert [(a.rule, a.step, a.severity) for a in report.alerts] == [
        ("ema_stalled", 160, "critical"), ("ema_stalled", 160, "warning")]
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
    assert diagnose(run, RulesConfig(enabled=False)).verdict == "healthy"


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


# ------------------------------------------------------------------------------------------ no metric rows at all
@pytest.mark.parametrize("contents, why", [
    ("", "the file is empty"),
    ("\n\n   \n\n", "only blank lines"),
    ("\n\n" + '{"step": 3, "lo', "only blank lines and a torn last line, as a writer killed mid-line leaves"),
    ('{"step": 0, "attempt": 0, "event": "cadence", "basic_every_steps": 5}\n', "only 1 event row"),
])
def test_no_metric_rows_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], contents: str,
                                             why: str) -> None:
    run = write_run(tmp_path, [], tail=contents)
    assert doctor_main([str(run)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"jepa doctor: {run / 'metrics.jsonl'}: no metric rows ({why})\n"


# ------------------------------------------------------------------------------------- terminal-safe printing
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil\rover\x08\nsecond line\x00"


def test_terminal_safe_escapes_every_control_character() -> None:
    controls = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]] + ["\u2028", "\u2029", "\u202e", "\u2066"]
    for char in controls:
        escaped = terminal_safe(f"a{char}b")
        assert escaped.startswith("a\\") and escaped.endswith("b") and char not in escaped
        assert escaped.isprintable()
    assert terminal_safe("line\nnext") == "line\\nnext"
    assert terminal_safe("\x1b[2J") == "\\x1b[2J"
    assert terminal_safe("\x9b") == "\\x9b" and terminal_safe("\u202e") == "\\u202e"
    printable = "plain ascii, unicode \u00e9\u65e5\u672c\U0001f600, back\\slash and 'quotes'"
    assert terminal_safe(printable) == printable


def hostile_run(tmp_path: Path) -> Path:
    alert = {"step": 100, "attempt": 0, "event": "alert", "rule": f"rule{HOSTILE}", "severity": "warning",
             "metric": f"loss{HOSTILE}", "value": 1.0, "message": f"message{HOSTILE}"}
    return write_run(tmp_path, healthy_rows() + [alert], name=f"run{HOSTILE.replace(chr(0), '')}")


def test_doctor_escapes_strings_from_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = hostile_run(tmp_path)
    assert doctor_main([str(run)]) == 1
    out = capsys.readouterr().out
    assert all(line.isprintable() for line in out.splitlines())
    assert "message\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202eevil\\rover\\x08\\nsecond line\\x00" in out
    assert "rule\\x1b]0;pwned" in out and "loss\\x1b]0;pwned" in out and "run\\x1b]0;pwned" in out
    assert not any(line.startswith("second line") for line in out.splitlines())  # the newline did not break a line


def test_doctor_json_escapes_c1_controls_and_stays_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = hostile_run(tmp_path)
    assert doctor_main([str(run), "--json"]) == 1
    out = capsys.readouterr().out
    assert out.endswith("\n") and out.rstrip("\n").isprintable()
    assert "\x9b" not in out and "\u202e" not in out and "\x1b" not in out
    alert = [a for a in strict_json(out)["alerts"] if a["rule"].startswith("rule")][0]
    assert alert["message"] == f"message{HOSTILE}"  # escaped on screen, unchanged in meaning


def test_unreadable_path_is_escaped_in_the_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor_main([str(tmp_path / f"missing{HOSTILE}")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip("\n").isprintable() and "missing\\x1b]0;pwned" in err


# ---------------------------------------------------------------------------------------------- closed pipes
def many_alerts_run(tmp_path: Path) -> Path:
    """A report far longer than a pipe buffer (64 KiB), so writing it must meet the closed read end."""
    # 1,000 distinct (rule, step) pairs (the doctor deduplicates on them), two printed lines of ~80 bytes each.
    alerts = [{"step": step, "attempt": 0, "event": "alert", "rule": f"loud{i}", "severity": "warning",
               "metric": "loss", "value": 1.0, "message": "x" * 60} for step in range(0, 200, 5) for i in range(25)]
    rows = healthy_rows() + alerts
    return write_run(tmp_path, rows)


def run_into_closed_pipe(args: list[str], lines_before_close: int) -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-m", "jepa_core.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    for _ in range(lines_before_close):
        assert proc.stdout.readline()
    proc.stdout.close()  # `| head -N` exits
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


def test_doctor_into_a_pipe_closed_after_one_line_ends_quietly(tmp_path: Path) -> None:
    code, err = run_into_closed_pipe(["doctor", str(many_alerts_run(tmp_path))], lines_before_close=1)
    assert code == EXIT_BROKEN_PIPE == 141
    assert err == ""  # no BrokenPipeError traceback, no "Exception ignored" at interpreter exit


def test_recorded_run_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    # A short report is buffered whole and fails only at the final flush, the case Python reports at exit.
    run = Path(shutil.copytree(Path(__file__).resolve().parent.parent / "data" / "runs" / "fault_collapse",
                               tmp_path / "fault_collapse"))
    code, err = run_into_closed_pipe(["doctor", str(run)], lines_before_close=0)
    assert code == EXIT_BROKEN_PIPE and err == ""


def test_broken_pipe_guard_passes_other_outcomes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    # In process the guard must not point the test runner's own descriptors at /dev/null: streams without a
    # file descriptor are left alone (the subprocess tests above cover the real redirection).
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert exit_quietly_on_broken_pipe(lambda: 3) == 3

    def broken() -> int:
        raise BrokenPipeError(32, "Broken pipe")

    assert exit_quietly_on_broken_pipe(broken) == EXIT_BROKEN_PIPE

    def failing() -> int:
        raise RuntimeError("not a pipe problem")

    with pytest.raises(RuntimeError, match="not a pipe problem"):
        exit_quietly_on_broken_pipe(failing)


@pytest.mark.parametrize("word", ["stopped", "stopped_on_alert", "diverged", "finished", "crashed"])
def test_an_ended_run_shows_its_status_verbatim_and_no_eta(tmp_path: Path, word: str) -> None:
    rows = healthy_rows(steps=50)
    for row in rows:
        row.update({"time/samples_per_second": 100.0, "time/eta_seconds": 120.0})
    run = write_run(tmp_path, rows)
    (run / "meta.json").write_text(json.dumps({"status": word, "last_step": 47}))
    report = diagnose(run)
    assert report.status == word and report.last_step == 47
    text = format_report(report)
    assert f"run status: {word}, last step 47" in text and "ETA" not in text
    assert strict_json(json.dumps(report.to_dict()))["status"] == word


def test_a_live_run_shows_its_eta_and_a_dead_writer_reads_crashed(tmp_path: Path) -> None:
    import os
    import socket

    from jepa_core.run.lock import RunLock

    rows = healthy_rows(steps=50)
    for row in rows:
        row.update({"time/samples_per_second": 100.0, "time/eta_seconds": 120.0})
    run = write_run(tmp_path, rows)
    (run / "meta.json").write_text(json.dumps({"status": "running", "pid": os.getpid(),
                                               "hostname": socket.gethostname()}))
    with RunLock(run):
        report = diagnose(run)
        assert report.status == "running" and "ETA 2m00s" in format_report(report)
    assert diagnose(run).status == "crashed"  # "running" in meta.json, but nobody holds the run any more


# ------------------------------------------------------------------------------------- an archived (gzipped) run


def test_an_archived_run_gets_the_verdict_its_plain_stream_gets(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    def leak(step: int, row: dict) -> None:
        if step >= 50:
            row["mask/overlap_fraction"] = 0.25

    plain = write_run(tmp_path, healthy_rows(mutate=leak), name="plain")
    archived = tmp_path / "archived"
    archived.mkdir()
    (archived / "metrics.jsonl.gz").write_bytes(gzip.compress((plain / "metrics.jsonl").read_bytes()))
    want = diagnose(plain)
    for run in (archived, archived / "metrics.jsonl.gz"):  # the directory, or the file itself
        got = diagnose(run)
        assert (got.verdict, [a.to_row() for a in got.alerts], got.key_metrics) == (
            want.verdict, [a.to_row() for a in want.alerts], want.key_metrics)
    assert doctor_main([str(archived)]) == 1
    assert "mask collator" in capsys.readouterr().out


def test_a_plain_stream_beside_its_archive_is_the_one_read(tmp_path: Path) -> None:
    run = write_run(tmp_path, healthy_rows())  # the live file wins: an archive beside it may be stale
    (run / "metrics.jsonl.gz").write_bytes(gzip.compress(b"not the stream\n"))
    assert diagnose(run).verdict == "healthy"


def test_a_run_without_either_stream_names_both_and_a_damaged_archive_names_itself(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(UnreadableRunError, match=r"no metrics\.jsonl \(nor metrics\.jsonl\.gz\)"):
        diagnose(run)
    (run / "metrics.jsonl.gz").write_bytes(b'{"step": 1, "loss": 0.5}\n')  # plain text under a .gz name
    assert doctor_main([str(run)]) == 2
    err = capsys.readouterr().err
    assert "metrics.jsonl.gz" in err and "not a readable gzip stream" in err
