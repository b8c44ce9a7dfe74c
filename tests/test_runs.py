"""Run discovery, summaries, live following and launch helpers of jepa_core.workbench.runs."""

from __future__ import annotations

import gzip
import json
import os
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from jepa_core.workbench import runs
from jepa_core.common.console import format_duration
from jepa_core.run import status as words
from jepa_core.run.lock import RunLock
from jepa_core.workbench.detached import launch_detached
from jepa_core.workbench.live import LiveRun
from jepa_core.workbench.markup import summary_markdown
from browser_util import XSS, write_synthetic_run


def set_meta(run_dir: Path, **fields) -> None:
    meta = json.loads((run_dir / "meta.json").read_text())
    meta.update(fields)
    (run_dir / "meta.json").write_text(json.dumps(meta))


def test_discover_runs_over_two_roots_with_status_and_last_step(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path / "runs" / "done", steps=30)
    crashed = write_synthetic_run(tmp_path / "data" / "runs" / "dead", steps=20, status="running")
    set_meta(crashed, pid=2**22 + 12345, hostname=socket.gethostname())  # no such process
    with open(crashed / "metrics.jsonl", "a") as f:
        f.write('{"step": 21, "attempt": 1, "loss": 0.')  # torn last line: ignored
    (tmp_path / "runs" / ".staging").mkdir()
    (tmp_path / "runs" / ".staging" / "meta.json").write_text("{}")
    (tmp_path / "runs" / "not-a-run").mkdir()
    found = runs.discover_runs([tmp_path / "runs", tmp_path / "data" / "runs", tmp_path / "missing"])
    by_name = {r.name: r for r in found}
    assert set(by_name) == {"done", "dead"}
    assert by_name["done"].status == "finished" and by_name["done"].steps == 30
    assert by_name["dead"].status == "crashed" and by_name["dead"].steps == 20
    assert "dead" in by_name["dead"].label


@pytest.mark.parametrize("word", words.STATUSES)
def test_every_status_word_is_shown_verbatim(word: str, tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "r", status=word)
    set_meta(run, pid=os.getpid(), hostname=socket.gethostname(), last_step=207)
    info = runs.run_info(run)
    assert info.status == word  # stopped is not "finished", stopped_on_alert is not "unknown"
    assert info.steps == (200 if word == words.RUNNING else 207)  # meta's last_step once it is not running


def test_run_status_from_meta_pid_and_mtime() -> None:
    now = 1000.0
    assert words.run_status({"status": "weird"}, None, now) == "unknown"
    assert words.run_status({}, None, now) == "unknown"
    here = socket.gethostname()
    assert words.run_status({"status": "running", "pid": os.getpid(), "hostname": here}, 0.0, now) == "running"
    assert words.run_status({"status": "paused", "pid": 2**22 + 7, "hostname": here}, now, now) == "crashed"
    other = {"status": "running", "hostname": "elsewhere", "pid": 1}
    assert words.run_status(other, now - 5, now) == "running"
    assert words.run_status(other, now - words.STALE_SECONDS - 1, now) == "crashed"


def test_a_live_claim_reads_crashed_once_the_writer_lock_is_free(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "r", status="running")
    set_meta(run, pid=os.getpid(), hostname=socket.gethostname())  # a live pid: only the lock can tell
    lock = RunLock(run).acquire()
    try:
        assert runs.run_info(run).status == "running"
        set_meta(run, status="paused")
        assert runs.run_info(run).status == "paused"
    finally:
        lock.release()
    assert runs.run_info(run).status == "crashed"  # the writer went away without recording how it ended


def test_last_step_comes_from_the_run_not_the_last_logged_row(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "r", steps=30, status="stopped")
    set_meta(run, last_step=34)
    assert runs.run_info(run).steps == 34
    set_meta(run, last_step=None)
    assert runs.run_info(run).steps == 30  # meta has nothing: the stream's last step
    assert runs.load_run_summary(run, with_verdict=False).steps == 30


def test_load_run_summary_reads_config_meta_duration_and_verdict(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "r")
    set_meta(run, faults=["mask_leak"], device_name="Test CPU")
    summary = runs.load_run_summary(run)
    assert summary.status == "finished" and summary.steps == 200 and summary.problems == []
    assert summary.duration_seconds == 300.0 and format_duration(summary.duration_seconds) == "5m00s"
    assert summary.device == "Test CPU" and summary.faults == ["mask_leak"]
    assert summary.config["optim"]["lr"] == 0.001
    assert summary.verdict in {"healthy", "warning", "critical"}
    assert ("lr", "0.001") in runs.config_summary(summary.config)


def test_load_run_summary_degrades_naming_each_damaged_file(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "r")
    (run / "meta.json").write_text("{not json")
    (run / "config.toml").write_bytes(b"[model]\nname = \"\xff\xfe\"\n")  # not UTF-8
    summary = runs.load_run_summary(run)
    assert summary.status == "unknown" and summary.steps == 200 and summary.config == {}
    assert summary.verdict is not None  # the stream is fine: the doctor still reads it
    assert len(summary.problems) == 2
    assert "meta.json" in summary.problems[0] and "malformed JSON" in summary.problems[0]
    assert "config.toml" in summary.problems[1] and "UTF-8" in summary.problems[1]
    (run / "config.toml").write_text("[model\n")
    assert "malformed TOML" in runs.load_run_summary(run, with_verdict=False).problems[1]
    assert runs.run_info(run).problems == (summary.problems[0],)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        runs.load_run_summary(tmp_path / "nowhere")


def test_load_run_table_reports_skipped_lines_and_a_missing_stream(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "r", steps=10)
    with open(run / "metrics.jsonl", "a") as f:
        f.write("garbage\n")
        f.write(json.dumps({"step": 11, "attempt": 1, "loss": 0.1}) + "\n")
    table, problems = runs.load_run_table(run)
    assert table.scalars["step"].max() == 11
    assert len(problems) == 1 and "metrics.jsonl" in problems[0] and "line 13" in problems[0]
    (run / "metrics.jsonl").unlink()
    table, problems = runs.load_run_table(run)
    assert table.scalars.empty and "missing" in problems[0]


def test_summary_markdown_escapes_strings_from_files(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "r")
    set_meta(run, name=XSS, device=XSS)
    text = summary_markdown(runs.load_run_summary(run, with_verdict=False))
    assert "<img" not in text and "onerror" in text
    assert text.count("&#60;img src&#61;x onerror&#61;window&#46;&#95;&#95;xss&#61;1&#62;") == 2


def test_resolve_run_prefers_named_then_env_then_shipped_healthy(tmp_path: Path) -> None:
    data = tmp_path / "data" / "runs"
    write_synthetic_run(data / "a_fault")
    write_synthetic_run(data / "b_healthy")
    other = write_synthetic_run(tmp_path / "other")
    roots = (data, tmp_path / "runs")
    assert runs.resolve_run(None, None, roots) == data / "b_healthy"
    assert runs.resolve_run(None, str(other), roots) == other
    assert runs.resolve_run(str(other), "ignored", roots) == other
    assert runs.resolve_run(None, None, (tmp_path / "none",)) is None
    with pytest.raises(FileNotFoundError, match="not-a-run"):
        runs.resolve_run(str(tmp_path / "not-a-run"), None, roots)


def test_live_run_follows_appended_rows_and_applies_resume_purge(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "live", steps=10, status="running", nan_step=None)
    set_meta(run, pid=os.getpid(), hostname=socket.gethostname())
    live = LiveRun(run)
    assert live.follower is not None
    assert live.table.scalars["step"].max() == 10 and live.poll() is False
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 11, "attempt": 1, "loss": 0.5}) + "\n")
        f.write('{"step": 12, "attempt": 1, "lo')  # torn: waits for the rest
    assert live.poll() is True and live.table.scalars["step"].max() == 11
    with open(run / "metrics.jsonl", "a") as f:
        f.write('ss": 0.4}\n')
        # resumed from a checkpoint at step 8: attempt 2 rewrites steps 9.. and purges attempt 1's
        f.write(json.dumps({"step": 9, "attempt": 2, "loss": 9.0}) + "\n")
        f.write(json.dumps({"step": 9, "attempt": 2, "event": "alert", "rule": "divergence",
                            "severity": "warning", "metric": "loss", "value": 9.0, "message": XSS}) + "\n")
    assert live.poll() is True
    scalars = live.table.scalars
    assert list(scalars.loc[scalars["step"] >= 9, "loss"]) == [9.0]
    assert list(live.table.alerts["rule"]) == ["divergence"]
    assert live.table.alerts["message"].iloc[-1] == XSS


def test_a_followed_table_equals_a_one_shot_read_after_every_poll(tmp_path: Path) -> None:
    """The live path and `read_metrics` share one row reader: polled after each piece of a stream written in
    pieces (cut between lines and inside them), the live frames equal a one-shot read of the file so far, columns,
    dtypes and rows, through a resume whose attempt 2 purges attempt 1's later rows and alerts."""
    import pandas as pd

    from jepa_core.metrics.reader import read_metrics
    from jepa_core.metrics.stream import encode_row

    def alert(step: int, attempt: int, rule: str) -> dict:
        return {"step": step, "attempt": attempt, "event": "alert", "rule": rule, "severity": "warning",
                "metric": "loss", "value": float("nan") if step == 3 else 2.0, "message": f"{rule} at {step}"}

    lines = []
    for step in range(10):  # attempt 1: int, bool, text and late metrics, a NaN, events, a bad line
        row = {"step": step, "attempt": 1, "loss": 1.0 / (step + 1), "data/skipped_images": step % 3,
               "flag": step % 2 == 0, "note": "text is left out"}
        if step >= 4:
            row["knn/accuracy"] = 0.1 * step
        if step == 5:
            row["loss"] = float("nan")
        lines.append(encode_row(row))
        if step == 2:
            lines.append(encode_row({"step": 2, "attempt": 1, "event": "cadence", "basic_every_steps": 5}))
        if step in (3, 7):
            lines.append(encode_row(alert(step, 1, f"rule{step}")))  # the one at step 7 is purged by attempt 2
        if step == 6:
            lines += ["not json", ""]
    for step in range(6, 13):  # attempt 2 resumed from step 5's checkpoint
        lines.append(encode_row({"step": step, "attempt": 2, "loss": 5.0 + step, "lr": 1e-3}))
        if step == 8:
            lines.append(encode_row(alert(step, 2, "rule8")))
    text = "".join(line + "\n" for line in lines).encode()
    ends, offset = [], 0  # where each piece ends: after every second line, and inside a line now and then
    for i, line in enumerate(lines):
        if i % 5 == 2 and len(line) > 10:
            ends.append(offset + len(line) // 2)  # a torn last line: neither reader takes it for a row
        offset += len(line) + 1
        if i % 2 == 1 or i == len(lines) - 1:
            ends.append(offset)
    assert ends == sorted(ends) and ends[-1] == len(text)

    run = tmp_path / "live"
    run.mkdir()
    live = LiveRun(run)  # no stream yet: followed
    path, written = run / "metrics.jsonl", 0
    for end in ends:
        with open(path, "ab") as handle:
            handle.write(text[written:end])
        written = end
        live.poll()
        want = read_metrics(path)
        pd.testing.assert_frame_equal(live.table.scalars, want.scalars, check_exact=True)
        pd.testing.assert_frame_equal(live.table.alerts, want.alerts, check_exact=True)
    scalars, alerts = live.table.scalars, live.table.alerts
    assert scalars["step"].tolist() == list(range(13))
    assert scalars["attempt"].tolist() == [1] * 6 + [2] * 7
    assert alerts["rule"].tolist() == ["rule3", "rule8"]
    assert list(scalars.columns) == ["step", "attempt", "loss", "data/skipped_images", "flag", "knn/accuracy", "lr"]
    assert set(scalars.dtypes.iloc[2:]) == {np.dtype(np.float64)}  # ints and bools too, as read_metrics has them
    assert live.poll() is False  # nothing new


def test_live_run_reads_a_finished_run_once(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "done", steps=150)
    live = LiveRun(run)
    assert live.follower is None and live.poll() is False
    assert len(live.table.alerts) == 1 and live.table.scalars["step"].max() == 150


def test_launch_detached_refuses_an_existing_run_directory(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="taken"):
        launch_detached([], "taken", runs_dir=tmp_path)


def test_pid_alive() -> None:
    assert words.pid_alive(os.getpid()) is True
    assert words.pid_alive(None) is False and words.pid_alive(-3) is False


def test_last_logged_step_reads_only_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    assert runs.last_logged_step(path) is None
    path.write_text('{"step": 3, "attempt": 1}\n{"step": 4, "att')
    assert runs.last_logged_step(path) == 3


def test_run_argument_keeps_values_with_spaces_and_equals_signs() -> None:
    assert runs.run_argument(["--run", f"/tmp/{XSS}"]) == f"/tmp/{XSS}"
    assert runs.run_argument(["-q", "--run=/a b=c"]) == "/a b=c"
    assert runs.run_argument(["-ra", "tests/x.py"]) is None


@pytest.mark.slow
def test_launch_detached_trains_and_stops_through_the_control_file(tmp_path: Path) -> None:
    from jepa_core.run.control import write_control
    from jepa_core.workbench.plan import form_overrides

    overrides = form_overrides({"optim.batch_size": 16, "optim.steps": 400, "eval.at_start": False,
                                "data.num_train": 512, "runtime.num_threads": 1, "logging.tensorboard": False})
    launched = launch_detached(overrides, "detached", runs_dir=tmp_path)
    try:
        deadline = time.monotonic() + 180
        while (runs.last_logged_step(launched.run_dir / "metrics.jsonl") or 0) < 3:
            assert not launched.exited(), launched.log_path.read_text()[-2000:]
            assert time.monotonic() < deadline, "no training steps logged"
            time.sleep(0.5)
        assert runs.run_info(launched.run_dir).status == "running"
        write_control(launched.run_dir, stop=True)
        assert launched.process.wait(timeout=180) == 0
    finally:
        if launched.process.poll() is None:
            launched.process.kill()
            launched.process.wait(timeout=30)
    info = runs.run_info(launched.run_dir)
    meta = json.loads((launched.run_dir / "meta.json").read_text())
    assert info.status == "stopped" == meta["status"]  # shown as written: ended on request
    assert info.steps == meta["last_step"] < 400


def test_an_archived_run_is_listed_summarised_and_shown_as_its_plain_form_is(tmp_path: Path) -> None:
    # `gzip metrics.jsonl` in a finished run, or a record of the detection library (no meta.json at all): every
    # view reads the archive, and none of them follows it.
    plain = write_synthetic_run(tmp_path / "runs" / "plain", steps=150)
    archived = tmp_path / "runs" / "archived"
    archived.mkdir()
    for name in ("config.toml", "meta.json"):
        (archived / name).write_bytes((plain / name).read_bytes())
    (archived / "metrics.jsonl.gz").write_bytes(gzip.compress((plain / "metrics.jsonl").read_bytes()))
    assert runs.last_logged_step(archived / "metrics.jsonl.gz") == runs.last_logged_step(plain / "metrics.jsonl")
    want, got = runs.load_run_summary(plain), runs.load_run_summary(archived)
    assert (got.status, got.steps, got.verdict, got.problems) == (want.status, want.steps, want.verdict, [])
    (want_table, _), (got_table, got_problems) = runs.load_run_table(plain), runs.load_run_table(archived)
    assert got_problems == [] and got_table.scalars.equals(want_table.scalars)
    live = LiveRun(archived)
    assert live.follower is None and live.poll() is False and live.table.scalars.equals(want_table.scalars)
    (archived / "meta.json").unlink()  # a library record: the stream alone makes it a run
    assert {r.name for r in runs.discover_runs([tmp_path / "runs"])} == {"plain", "archived"}
    assert runs.run_info(archived).steps == 150
    (archived / "metrics.jsonl.gz").write_bytes(b"plain text under a .gz name\n")
    assert runs.last_logged_step(archived / "metrics.jsonl.gz") is None
    assert "not a readable gzip stream" in runs.load_run_table(archived)[1][0]
    damaged = LiveRun(archived)  # the monitor opens it with the damage named, not a traceback
    assert damaged.table.scalars.empty and "metrics.jsonl.gz" in damaged.problems[0]
    assert "not a readable gzip stream" in damaged.problems[0]
