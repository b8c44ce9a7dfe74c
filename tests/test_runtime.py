"""The device side of training on CPU: phase timing in the stream, profiler traces, the compile switch (wired through,
its compiling steps kept out of the ETA), fused AdamW only on CUDA. Nothing here measures speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from jepa_core.method import runtime
from jepa_core.config import ConfigError, apply_overrides, preset
from jepa_core.method.runtime import CompileWarmup, PhaseTimer, parse_profile_steps, phase_metrics
from jepa_core.metrics.reader import read_metrics
from jepa_core.run.trainer import Trainer
from jepa_core.train import main

FAST = ["optim.steps=6", "optim.batch_size=16", "optim.warmup_steps=2", "data.num_train=128", "data.num_heldout=64",
        "eval.probe_epochs=5", "eval.at_start=false", "diagnostics.eval_every_steps=100", "logging.tensorboard=false",
        "logging.progress_bar=false", "diagnostics.basic_every_steps=2", "logging.checkpoint_every_steps=100"]


def fast_trainer(tmp_path: Path, *extra: str, **kwargs) -> Trainer:
    cfg = apply_overrides(preset("tiny"), [*FAST, f"logging.runs_dir={json.dumps(str(tmp_path))}", *extra])
    return Trainer(cfg, run_dir=tmp_path / "run", quiet=True, **kwargs)


def test_basic_rows_carry_the_phase_split(tmp_path: Path) -> None:
    trainer = fast_trainer(tmp_path, "diagnostics.weights_health_every_steps=4")
    assert trainer.run() == "finished"
    frame = read_metrics(tmp_path / "run" / "metrics.jsonl").scalars
    rows = frame[frame["loss"].notna()]
    assert rows["step"].tolist() == [2, 4, 6]
    for phase in ("data", "forward_backward", "optimizer", "ema", "diagnostics"):
        values = rows[f"time/{phase}_seconds"]
        assert values.notna().all() and (values >= 0).all(), phase
    # The phases are parts of the step: together they never exceed the step plus the diagnostics after it.
    parts = rows[[f"time/{p}_seconds" for p in ("data", "forward_backward", "optimizer", "ema")]].sum(axis=1)
    assert (parts <= rows["time/step_seconds"] + 1e-6).all()
    assert "data/skipped_images" not in frame.columns  # in-memory shapes: nothing is decoded, nothing skipped


def test_phase_timer_sums_marked_spans_per_phase() -> None:
    timer = PhaseTimer(torch.device("cpu"))
    for phase in ("forward_backward", "diagnostics", "forward_backward", "optimizer"):
        timer.mark(phase)
    seconds = timer.seconds()
    assert set(seconds) == {"forward_backward", "diagnostics", "optimizer"}
    assert all(v >= 0 for v in seconds.values())
    metrics = phase_metrics(timer, diagnostics_seconds=0.5)
    assert metrics["time/diagnostics_seconds"] == pytest.approx(seconds["diagnostics"] + 0.5)
    assert phase_metrics(None, 0.25) == {"time/diagnostics_seconds": 0.25}


@pytest.mark.parametrize("text, expected", [("3:5", (3, 5)), ("7:7", (7, 7))])
def test_profile_steps_parse(text: str, expected: tuple[int, int]) -> None:
    assert parse_profile_steps(text) == expected


@pytest.mark.parametrize("text", ["5:3", "0:2", "a:b", "4", "1:2:3", ""])
def test_bad_profile_steps_name_the_option(text: str) -> None:
    with pytest.raises(ConfigError, match="--profile-steps"):
        parse_profile_steps(text)


def test_profile_steps_write_a_chrome_trace_into_the_run_directory(tmp_path: Path) -> None:
    trainer = fast_trainer(tmp_path, profile_steps=(2, 3))
    assert trainer.run() == "finished"
    traces = list((tmp_path / "run" / "traces").iterdir())
    assert [p.name for p in traces] == ["steps_0000002-0000003.json"]
    trace = json.loads(traces[0].read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert {"data", "train_step", "diagnostics"} <= names  # the trainer's phases, around torch's own ops
    assert any(str(name).startswith("aten::") for name in names)


def test_cli_rejects_bad_profile_steps_before_writing(tmp_path: Path, capsys) -> None:
    code = main(["--profile-steps", "9:2", "--set", f"logging.runs_dir={json.dumps(str(tmp_path))}"])
    assert code == 2 and "--profile-steps" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_compile_flag_compiles_the_step_modules_and_not_the_checkpointed_ones(tmp_path: Path, monkeypatch) -> None:
    compiled: list[torch.nn.Module] = []

    def fake_compile(module: torch.nn.Module) -> torch.nn.Module:
        compiled.append(module)
        return module  # inductor on this CPU takes minutes; what matters here is what gets compiled

    monkeypatch.setattr(runtime.torch, "compile", fake_compile)
    trainer = fast_trainer(tmp_path, "runtime.compile=true")
    assert [type(m).__name__ for m in compiled] == ["OnlineNetwork", "VisionTransformer"]
    assert compiled[1] is trainer.model.target_encoder and compiled[0].context_encoder is trainer.model.context_encoder
    assert trainer.run() == "finished"


def test_without_the_flag_nothing_is_compiled(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runtime.torch, "compile", lambda module: pytest.fail("compiled without runtime.compile"))
    trainer = fast_trainer(tmp_path)
    assert trainer.step_online is trainer.online and trainer.step_target is trainer.model.target_encoder
    trainer.close()


class FakeInstrumentation:
    def __init__(self) -> None:
        self.state = {"step_time_ema": 0.1, "step_time_updates": 3, "gns": "kept"}

    def state_dict(self) -> dict:
        return dict(self.state)

    def load_state_dict(self, state: dict) -> None:
        self.state.update(state)

    @property
    def smoothed_step_seconds(self) -> float:
        return self.state["step_time_ema"]


def test_a_step_that_compiled_is_left_out_of_the_eta(monkeypatch) -> None:
    graphs = iter([0, 1, 1, 1])  # the first step builds a graph; the second does not
    monkeypatch.setattr(runtime, "compiled_graph_count", lambda: next(graphs))
    inst, warmup = FakeInstrumentation(), CompileWarmup(True, total_steps=100)

    before = warmup.before(inst)
    inst.state.update(step_time_ema=60.0, step_time_updates=4)  # what the compiling step did to the average
    metrics = {"time/eta_seconds": 5000.0, "time/step_seconds": 60.0}
    assert warmup.after(before, inst, step=10, metrics=metrics)
    assert inst.state == {"step_time_ema": 0.1, "step_time_updates": 3, "gns": "kept"}
    assert metrics == {"time/eta_seconds": pytest.approx(90 * 0.1), "time/step_seconds": 60.0}

    before = warmup.before(inst)
    inst.state.update(step_time_ema=0.2, step_time_updates=4)
    assert not warmup.after(before, inst, step=11, metrics={})
    assert inst.state["step_time_ema"] == 0.2  # a steady step counts
    assert CompileWarmup(False, 100).before(inst) is None


def test_adamw_is_fused_where_pytorch_has_the_kernel(tmp_path: Path) -> None:
    trainer = fast_trainer(tmp_path)
    assert trainer.device.type == "cpu" and trainer.optimizer.defaults.get("fused")
    trainer.close()
