"""The monitor API's lifecycle and contract (issue 47), driven in-process with the example loop's small modules:
how a run ends, non-finite losses, critical alerts, control.json, bad use."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from jepa_core.metrics.stream import iter_rows
from jepa_core.monitor import CriticalAlert, JEPAMonitor
from jepa_core.run.control import write_control
from jepa_core.run.lock import lock_holder

REPO = Path(__file__).resolve().parent.parent


def example():
    spec = importlib.util.spec_from_file_location("own_loop_example", REPO / "examples" / "own_loop.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EX = example()
CADENCES = {k: 1 for k in ("basic_every_steps", "representation_every_steps", "fixed_batch_every_steps",
                           "mask_check_every_steps", "covariance_every_steps", "param_distance_every_steps",
                           "weights_health_every_steps")}


def make(tmp_path: Path, name: str = "run", **kwargs) -> JEPAMonitor:
    torch.manual_seed(0)
    encoder, target, predictor = EX.Encoder(), EX.Encoder(), EX.Predictor()
    target.load_state_dict(encoder.state_dict())
    target.requires_grad_(False)
    with torch.no_grad():  # as after a few updates: the online encoder a little away from its EMA
        for param in encoder.parameters():
            param.add_(1e-3 * torch.randn_like(param))
    return JEPAMonitor(tmp_path / name, encoder, target, predictor, total_steps=kwargs.pop("total_steps", 4),
                       input_shape=(3, 32, 32), diagnostics=kwargs.pop("diagnostics", CADENCES), tensorboard=False,
                       quiet=True, **kwargs)


def feed(monitor: JEPAMonitor, step: int, loss: float = 0.5) -> dict:
    gen = torch.Generator().manual_seed(step)
    enc, pred = EX.sample_masks(4, 8, gen)
    parts = monitor.parts
    imgs = torch.randn(4, 3, 32, 32, generator=gen)
    with torch.no_grad():
        h_all = torch.nn.functional.layer_norm(parts.target_encoder(imgs), (64,))
        h = EX.apply_masks(h_all, pred)
        z = parts.predictor(parts.context_encoder(imgs, enc), enc, pred)
    return monitor.step(step, loss=torch.tensor(loss), pred=z, target=h, target_tokens=h_all, context_masks=enc,
                        target_masks=pred, lr=1e-3, wd=0.04, ema_momentum=0.996)


def meta(run: Path) -> dict:
    return json.loads((run / "meta.json").read_text())


def test_a_loop_that_raises_ends_crashed_and_one_interrupted_ends_stopped(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with make(tmp_path, "boom") as monitor:
            feed(monitor, 1)
            assert lock_holder(tmp_path / "boom") is not None and meta(tmp_path / "boom")["status"] == "running"
            raise ZeroDivisionError("the user's bug")
    assert meta(tmp_path / "boom")["status"] == "crashed" and meta(tmp_path / "boom")["last_step"] == 1
    assert lock_holder(tmp_path / "boom") is None
    with pytest.raises(KeyboardInterrupt):
        with make(tmp_path, "ctrl-c") as monitor:
            feed(monitor, 1)
            raise KeyboardInterrupt
    assert meta(tmp_path / "ctrl-c")["status"] == "stopped"
    with make(tmp_path, "short") as monitor:  # left before total_steps
        feed(monitor, 1)
    assert meta(tmp_path / "short")["status"] == "stopped"
    with make(tmp_path, "whole", total_steps=2) as monitor:
        feed(monitor, 1)
        feed(monitor, 2)
    assert meta(tmp_path / "whole")["status"] == "finished" and monitor.close() == "finished"


def test_a_non_finite_loss_is_logged_and_alerted_but_the_loop_decides(tmp_path):
    with make(tmp_path) as monitor:
        feed(monitor, 1)
        metrics = feed(monitor, 2, loss=float("nan"))  # no exception into the loop
        feed(monitor, 3)
    rows = list(iter_rows(tmp_path / "run" / "metrics.jsonl"))
    assert any(r.get("step") == 2 and r.get("loss") != r.get("loss") for r in rows)  # NaN, round-tripped
    assert "\"NaN\"" in (tmp_path / "run" / "metrics.jsonl").read_text()
    alerts = [r for r in rows if r.get("event") == "alert"]
    assert [(a["rule"], a["severity"], a["step"]) for a in alerts] == [("non_finite", "critical", 2)]
    assert metrics["loss"] != metrics["loss"]
    with pytest.raises(CriticalAlert, match="non_finite"):  # only when asked
        with make(tmp_path, "strict", raise_on_critical=True) as strict:
            feed(strict, 1, loss=float("inf"))
    assert meta(tmp_path / "strict")["status"] == "crashed"


def test_control_json_steers_the_cadences_and_asks_to_stop(tmp_path):
    with make(tmp_path, total_steps=10, diagnostics={**CADENCES, "basic_every_steps": 5}) as monitor:
        assert "loss" not in feed(monitor, 1)
        write_control(tmp_path / "run", basic_every_steps=1)
        feed(monitor, 2)  # read after this step: applies from the next
        assert "loss" in feed(monitor, 3)
        assert not monitor.should_stop
        write_control(tmp_path / "run", stop=True)
        feed(monitor, 4)
        assert monitor.should_stop
    events = [r for r in iter_rows(tmp_path / "run" / "metrics.jsonl") if r.get("event") == "cadence"]
    assert events and events[0]["basic_every_steps"] == 1


def test_without_after_backward_the_gradient_metrics_are_left_out_and_said_so(tmp_path):
    with make(tmp_path, total_steps=2) as monitor:
        assert "grad_norm" not in feed(monitor, 1)
        feed(monitor, 2)
    assert "after_backward() was never called" in json.dumps(meta(tmp_path / "run")["not_measured"])
    config = (tmp_path / "run" / "config.toml").read_text()
    assert "embed_dim = 64" in config and "[model]\nembed_dim = 64\n\n" in config  # only what it knows


def test_bad_use_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="already exists"):
        make(tmp_path, "taken")
    with pytest.raises(TypeError, match="needs the predictor"):
        JEPAMonitor(tmp_path / "x", EX.Encoder(), EX.Encoder(), total_steps=2, input_shape=(3, 32, 32))
    with pytest.raises(ValueError, match="no parameters"):
        JEPAMonitor(tmp_path / "y", torch.nn.Flatten(), torch.nn.Flatten(), torch.nn.Flatten(), total_steps=2,
                    input_shape=(3, 32, 32))
    pooled = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(8))
    with pytest.raises(ValueError, match="must return tokens"):
        JEPAMonitor(tmp_path / "z", pooled, pooled, pooled, total_steps=2, input_shape=(3, 32, 32))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_one_module_and_the_names_of_its_parts(tmp_path):
    class Whole(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.ema, self.head = EX.Encoder(), EX.Encoder(), EX.Predictor()

    whole = Whole()
    monitor = JEPAMonitor(tmp_path / "whole", model=whole, total_steps=1, input_shape=(3, 32, 32), tensorboard=False,
                          parts={"context_encoder": "encoder", "target_encoder": "ema", "predictor": "head"})
    assert monitor.parts.target_encoder is whole.ema and monitor.parts.predictor is whole.head
    monitor.close()


def test_sigterm_in_the_loop_ends_the_run_stopped(tmp_path):
    script = (f"import sys, os, signal; sys.path.insert(0, {str(REPO / 'tests')!r})\n"
              "from test_monitor import make, feed\n"
              "from pathlib import Path\n"
              "with make(Path(sys.argv[1]), total_steps=100) as m:\n"
              "    feed(m, 1)\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    feed(m, 2)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "KeyboardInterrupt" in done.stderr
    assert meta(tmp_path / "run")["status"] == "stopped" and meta(tmp_path / "run")["last_step"] == 1
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # this process's handler untouched
