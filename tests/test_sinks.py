"""Fan-out logger (design §5): rank 0 only, canonical JSONL failure stops, mirror failure warns rate-limited."""

from __future__ import annotations

import json
import logging
import math
import sys
import types

import pytest
import torch

from jepa_core.metrics.sinks import (
    JsonlSink,
    MetricLogger,
    MetricSinkError,
    TensorBoardSink,
    TrackioSink,
    WandbSink,
)
from jepa_core.metrics.reader import read_metrics


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class BrokenSink:
    canonical = False

    def __init__(self) -> None:
        self.calls = 0

    def log(self, row: dict) -> None:
        self.calls += 1
        raise OSError("disk full")

    def flush(self) -> None:
        raise OSError("disk full")

    def close(self) -> None:
        pass


class RecordingSink:
    canonical = False

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.closed = False

    def log(self, row: dict) -> None:
        self.rows.append(row)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_rows_reach_every_sink_and_jsonl_reads_back(tmp_path):
    recorder = RecordingSink()
    path = tmp_path / "metrics.jsonl"
    with MetricLogger([JsonlSink(path, attempt=1), recorder]) as logger:
        logger.log(0, {"loss": torch.tensor(0.5), "lr": 1e-3}, epoch=0)
        logger.log(1, {"loss": math.nan})
        logger.alert(1, "non_finite", "critical", "loss", math.nan, "loss is NaN: check the lr")
    assert recorder.closed
    assert recorder.rows[0] == {"step": 0, "loss": 0.5, "lr": 1e-3, "epoch": 0}
    assert recorder.rows[2]["event"] == "alert" and math.isnan(recorder.rows[2]["value"])
    table = read_metrics(path)
    assert table.scalars["step"].tolist() == [0, 1] and math.isnan(table.scalars["loss"].iloc[1])
    assert table.alerts["rule"].tolist() == ["non_finite"]
    alert_line = json.loads(path.read_text().splitlines()[2])
    assert set(alert_line) == {"step", "attempt", "event", "rule", "severity", "metric", "value", "message"}


def test_rank_nonzero_writes_and_creates_nothing(tmp_path):
    run = tmp_path / "run"
    logger = MetricLogger([JsonlSink(run / "metrics.jsonl", attempt=1), TensorBoardSink(run / "tensorboard")], rank=1)
    logger.log(0, {"loss": 1.0})
    logger.alert(0, "r", "info", "loss", 1.0, "m")
    logger.flush()
    logger.fsync()
    logger.close()
    assert not run.exists()


def test_canonical_sink_failure_raises_metric_sink_error_naming_file(tmp_path):
    path = tmp_path / "metrics.jsonl"
    sink = JsonlSink(path, attempt=1)
    logger = MetricLogger([sink])
    logger.log(0, {"loss": 1.0})
    sink._writer.close()  # the file descriptor goes away under us
    with pytest.raises(MetricSinkError, match="metrics.jsonl"):
        logger.log(1, {"loss": 0.9})
    assert read_metrics(path).scalars["step"].tolist() == [0]  # what was written is intact


def test_canonical_sink_that_cannot_open_fails_at_construction(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    with pytest.raises(MetricSinkError, match="not_a_dir"):
        MetricLogger([JsonlSink(blocker / "metrics.jsonl", attempt=1)])


def test_broken_mirror_keeps_training_and_warns_rate_limited(tmp_path, caplog):
    clock = FakeClock()
    broken = BrokenSink()
    path = tmp_path / "metrics.jsonl"
    logger = MetricLogger([JsonlSink(path, attempt=1), broken], warn_every_seconds=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="jepa_core.metrics.sinks"):
        for step in range(5):  # all within one window
            logger.log(step, {"loss": 1.0})
        clock.now = 11.0
        logger.log(5, {"loss": 1.0})
        clock.now = 12.0
        logger.log(6, {"loss": 1.0})
    warnings = [r.getMessage() for r in caplog.records if "BrokenSink" in r.getMessage()]
    assert len(warnings) == 2
    assert "disk full" in warnings[0]
    assert "4 similar failures suppressed" in warnings[1]
    assert broken.calls == 7
    assert logger.failure_counts() == {"BrokenSink": 7}
    assert read_metrics(path).scalars["step"].tolist() == list(range(7))


def test_tensorboard_events_match_jsonl(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = MetricLogger([JsonlSink(tmp_path / "metrics.jsonl", attempt=1), TensorBoardSink(tmp_path / "tensorboard")])
    for step in range(0, 30, 3):
        metrics = {"loss": 1.0 / (step + 1), "target/std_mean": 0.1 * step}
        if step == 9:
            metrics["loss"] = math.inf
        logger.log(step, metrics)
    logger.alert(12, "divergence", "warning", "grad_norm", 7.5, "grad_norm climbs")
    logger.close()

    scalars = read_metrics(tmp_path / "metrics.jsonl").scalars
    accumulator = EventAccumulator(str(tmp_path / "tensorboard"))
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    assert tags == {"loss", "target/std_mean"}
    for tag in tags:
        events = accumulator.Scalars(tag)
        assert [e.step for e in events] == scalars["step"].tolist()
        tb_values = torch.tensor([e.value for e in events], dtype=torch.float32)
        jsonl_values = torch.tensor(scalars[tag].to_numpy(), dtype=torch.float32)
        assert torch.equal(tb_values, jsonl_values)
    assert "alerts/divergence/text_summary" in accumulator.Tags()["tensors"]
    text = accumulator.Tensors("alerts/divergence/text_summary")[0]
    assert text.step == 12 and b"grad_norm climbs" in text.tensor_proto.string_val[0]


def test_tensorboard_sink_keeps_nan(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sink = TensorBoardSink(tmp_path)
    sink.log({"step": 0, "loss": math.nan})
    sink.close()
    accumulator = EventAccumulator(str(tmp_path))
    accumulator.Reload()
    assert math.isnan(accumulator.Scalars("loss")[0].value)


def test_optional_sinks_name_the_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # makes `import wandb` raise ImportError
    monkeypatch.setitem(sys.modules, "trackio", None)
    with pytest.raises(ImportError, match="'wandb' package is not installed"):
        WandbSink(project="p")
    with pytest.raises(ImportError, match="'trackio' package is not installed"):
        TrackioSink(project="p")


def test_wandb_sink_logs_numeric_metrics_with_step(monkeypatch):
    logged: list[tuple[dict, int]] = []

    class FakeRun:
        def log(self, data, step):
            logged.append((data, step))

        def finish(self):
            logged.append(({"finished": True}, -1))

    fake = types.SimpleNamespace(init=lambda **kwargs: FakeRun())
    monkeypatch.setitem(sys.modules, "wandb", fake)
    sink = WandbSink(project="p")
    sink.log({"step": 3, "attempt": 1, "loss": 0.5, "note": "text"})
    sink.close()
    assert logged == [({"loss": 0.5}, 3), ({"finished": True}, -1)]


def test_trackio_sink_starts_lazily(monkeypatch):
    calls: list[str] = []
    fake = types.SimpleNamespace(init=lambda **kw: calls.append("init"), log=lambda d, step: calls.append(f"log{step}"),
                                 finish=lambda: calls.append("finish"))
    monkeypatch.setitem(sys.modules, "trackio", fake)
    sink = TrackioSink(project="p")
    assert calls == []
    sink.log({"step": 2, "loss": 1.0})
    sink.close()
    assert calls == ["init", "log2", "finish"]


def test_log_rejects_non_int_step(tmp_path):
    logger = MetricLogger([RecordingSink()])
    with pytest.raises(TypeError, match="step"):
        logger.log(1.5, {"loss": 1.0})
