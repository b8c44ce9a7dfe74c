"""SIGTERM and SIGINT stop a headless trainer gracefully: the step in flight finishes, a final checkpoint is
written at that step, every sink is closed, meta.json says `stopped`; a second signal ends the process at once."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jepa_core.run.checkpoint import find_resume_checkpoint
from jepa_core.metrics.stream import iter_rows

# Endless from the test's point of view: it is always signalled long before optim.steps.
ENDLESS = ["optim.steps=100000", "optim.warmup_steps=5", "optim.batch_size=16", "data.num_train=256",
           "data.num_heldout=64", "eval.at_start=false", "diagnostics.eval_every_steps=100000",
           "logging.checkpoint_every_steps=100000", "diagnostics.basic_every_steps=1", "logging.tensorboard=false",
           "runtime.num_threads=1"]


def launch(runs: Path, name: str, *extra: str, resume: bool = False) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "jepa_core.cli", "train", "--quiet"]
    cmd += ["--resume", str(runs / name)] if resume else ["--name", name]
    for item in ([] if resume else [*ENDLESS, f"logging.runs_dir={json.dumps(str(runs))}"]) + list(extra):
        cmd += ["--set", item]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_step(metrics: Path, step: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        if metrics.is_file() and any(r.get("step", 0) >= step for r in iter_rows(metrics)):
            return
        time.sleep(0.05)
    raise AssertionError(f"step {step} not reached in {timeout} s")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_gracefully_with_a_final_checkpoint(tmp_path, sig):
    proc = launch(tmp_path, "r")
    try:
        wait_for_step(tmp_path / "r" / "metrics.jsonl", 5, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    run = tmp_path / "r"
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "stopped"
    last = meta["last_step"]
    assert last >= 5
    found = find_resume_checkpoint(run / "checkpoints")
    assert found.state["step"] == last and not found.skipped  # the final checkpoint is at the step it stopped at
    assert max(r["step"] for r in iter_rows(run / "metrics.jsonl")) == last
    assert not list(run.rglob("*.tmp")) and (run / ".lock").read_text() == ""  # lock given back

    resumed = launch(tmp_path, "r", "optim.steps=" + str(last + 3), resume=True)
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-2000:]
    assert json.loads((run / "meta.json").read_text())["status"] == "finished"


def test_a_second_signal_ends_the_process_at_once(tmp_path):
    script = """
import os, signal, time
from jepa_core.run.signals import GracefulStop
with GracefulStop() as stop:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.2)
    print("first:", stop.is_set(), stop.signal_name, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    print("still alive", flush=True)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ["first: True SIGTERM"]
    assert done.returncode == -signal.SIGTERM


def test_graceful_stop_restores_the_previous_handlers():
    from jepa_core.run.signals import GracefulStop

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with GracefulStop() as stop:
        assert signal.getsignal(signal.SIGTERM) == stop._on_signal
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


@pytest.mark.slow
def test_sigterm_under_torchrun_stops_every_rank_at_the_same_step(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "jepa_core.train", "--quiet", "--name", "ddp"]
    for item in [*ENDLESS, f"logging.runs_dir={json.dumps(str(tmp_path))}"]:
        cmd += ["--set", item]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_step(tmp_path / "ddp" / "metrics.jsonl", 5, proc, timeout=240)
        proc.send_signal(signal.SIGTERM)  # torchrun passes it to each rank
        _, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    run = tmp_path / "ddp"
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "stopped", err[-3000:]
    last = meta["last_step"]
    assert last % 10 == 0  # ranks agree on a stop only at a control sync (every 10 steps)
    assert find_resume_checkpoint(run / "checkpoints").state["step"] == last
