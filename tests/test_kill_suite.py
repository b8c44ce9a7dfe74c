"""SIGKILL at random moments, some during checkpoint writes, then resume, again and again: the finished run must
equal an uninterrupted one (README "What survives what").

Guarantees checked: every resume starts (no manual repair), every line of the stream is strict JSON, after the
resume purge no (step, metric) cell is duplicated or missing, the loss at every step is bit-identical to the
uninterrupted run's, no temp file survives, and meta.json's attempt is the stream's largest attempt.
"""

import json
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from jepa_core.metrics.stream import iter_rows
from test_signals import launch

KILLS = 21
SETTINGS = ["optim.steps=90", "optim.warmup_steps=5", "optim.batch_size=16", "data.num_train=256",
            "data.num_heldout=64", "eval.at_start=false", "diagnostics.eval_every_steps=100000",
            "logging.checkpoint_every_steps=2", "diagnostics.basic_every_steps=1",
            "diagnostics.covariance_every_steps=3", "diagnostics.weights_health_every_steps=4",
            "logging.tensorboard=false", "runtime.num_threads=1"]
VOLATILE = ("time/", "system/", "memory/")  # wall-clock and process figures differ between any two runs


def cells(metrics: Path) -> dict[tuple[int, str], float]:
    """(step, metric) -> value after the resume purge; fails on a duplicated cell."""
    seen: Counter = Counter()
    values = {}
    for row in iter_rows(metrics):
        if "event" in row:
            continue
        for key, value in row.items():
            if key in ("step", "attempt") or key.startswith(VOLATILE):
                continue
            seen[(row["step"], key)] += 1
            values[(row["step"], key)] = value
    duplicated = [cell for cell, n in seen.items() if n > 1]
    assert not duplicated, f"{len(duplicated)} duplicated cells, e.g. {duplicated[:3]}"
    return values


def strict_json_lines(metrics: Path) -> int:
    def reject(token):
        raise ValueError(f"non-strict constant {token}")

    lines = metrics.read_text().splitlines()
    for line in lines:
        json.loads(line, parse_constant=reject)
    return len(lines)


def kill_at(proc, mode: str, run: Path, rng: random.Random) -> bool:
    """SIGKILL `proc` at a moment chosen by `mode`; True when a checkpoint write was in flight."""
    deadline = time.monotonic() + 60
    if mode == "startup":
        time.sleep(rng.uniform(0.2, 2.5))
    elif mode == "checkpoint":
        while time.monotonic() < deadline and proc.poll() is None:
            if any(p.name.endswith(".tmp") for p in (run / "checkpoints").glob(".*")):
                break
            time.sleep(0.001)
    else:  # training: let it make some progress first
        metrics = run / "metrics.jsonl"
        start = metrics.stat().st_size if metrics.exists() else 0
        while time.monotonic() < deadline and proc.poll() is None:
            if metrics.exists() and metrics.stat().st_size > start:
                break
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.8))
    during_write = any(p.name.endswith(".tmp") for p in (run / "checkpoints").glob(".*"))
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return during_write


@pytest.mark.slow
def test_sigkill_suite_resumes_to_the_uninterrupted_result(tmp_path):
    runs = tmp_path / "runs"
    reference = launch(runs, "reference", *SETTINGS)
    _, err = reference.communicate(timeout=600)
    assert reference.returncode == 0, err[-2000:]

    rng = random.Random(20261201)
    run = runs / "killed"
    modes = ["startup", "checkpoint", "training"]
    during_writes = launches = 0
    for i in range(KILLS):
        first = not (run / "config.toml").exists()
        proc = launch(runs, "killed", *SETTINGS) if first else launch(runs, "killed", resume=True)
        launches += 1
        during_writes += kill_at(proc, modes[i % 3], run, rng)
        assert proc.returncode == -signal.SIGKILL, f"launch {i} ended by itself ({proc.returncode})"
    final = launch(runs, "killed", resume=True)
    _, err = final.communicate(timeout=600)
    assert final.returncode == 0, err[-2000:]

    assert during_writes >= 5, f"only {during_writes} kills landed during a checkpoint write"
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "finished"
    assert strict_json_lines(run / "metrics.jsonl") > 0
    attempts = {row.get("attempt") for row in iter_rows(run / "metrics.jsonl")}
    assert meta["attempt"] == max(attempts) and max(attempts) <= launches + 1
    assert not list(run.rglob("*.tmp"))

    expected, got = cells(runs / "reference" / "metrics.jsonl"), cells(run / "metrics.jsonl")
    assert sorted(got) == sorted(expected)  # nothing missing, nothing extra
    losses = [(step, got[(step, "loss")], value) for (step, key), value in expected.items() if key == "loss"]
    assert len(losses) == 90 and all(a == b for _, a, b in losses)  # bit-identical
    differing = [cell for cell, value in expected.items() if got[cell] != value and value == value]
    assert not differing, f"{len(differing)} cells differ from the uninterrupted run, e.g. {differing[:3]}"
