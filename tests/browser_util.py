"""Helpers shared by the notebook/chart/run tests: synthetic run directories, servers, browsers.

The synthetic run mimics what the trainer writes (design §4, §5): sparse rows at cadences, an
alert row, a "NaN" loss, config.toml and meta.json. Its name can carry an HTML payload so the
escaping tests can check it is shown as text everywhere.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

XSS = "<img src=x onerror=window.__xss=1>"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
REPO = Path(__file__).resolve().parents[1]


def _value(v: float) -> float | str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def write_synthetic_run(run_dir: Path, steps: int = 200, status: str = "finished",
                        message: str = "target std fell; check the EMA and the masks",
                        nan_step: int | None = 150) -> Path:
    """A small run directory with realistic sparse metrics, one alert and one NaN loss."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.toml").write_text(
        '[model]\nsize = "tiny"\n\n[optim]\nlr = 0.001\nbatch_size = 32\n\n[data]\ndataset = "shapes"\n')
    meta = {"status": status, "device": "cpu", "world_size": 1, "attempt": 1,
            "start_time": 1_735_689_600.0, "versions": {"torch": "2"}}
    if status == "finished":
        meta["end_time"] = 1_735_689_900.0
    (run_dir / "meta.json").write_text(json.dumps(meta))
    lines = [{"step": 0, "params/total": 1000.0, "params/trainable": 800.0}]
    lines.append({"step": 0, "knn/accuracy": 0.2, "linear_probe/val_acc": 0.22})
    for s in range(1, steps + 1):
        loss = 1.0 / math.sqrt(s) + 0.01 * math.sin(s)
        row: dict = {"step": s, "loss": _value(float("nan") if s == nan_step else loss),
                     "lr": 1e-3, "grad_norm": 0.5 + 0.1 * math.cos(s),
                     "time/samples_per_second": 300.0 + s % 7, "time/step_seconds": 0.1}
        if s % 5 == 0:
            std = 0.5 if s < 120 else 0.5 * math.exp(-(s - 120) / 20)
            row.update({"target/std_mean": std, "target/std_l2n": std / 8,
                        "target/dead_dim_fraction": 0.0 if s < 120 else min(1.0, (s - 120) / 80),
                        "target/effective_rank": 40.0 - s * 0.05, "target/token_effective_rank": 60.0,
                        "pred_target/cosine": 0.5 + s / 1000, "mask/overlap_fraction": 0.0,
                        "ema_tau": 0.996, "ema/relative_param_l2": 0.01, "ema/target_grad_params": 0.0})
        if s % 50 == 0:
            row.update({"knn/accuracy": 0.2 + s / 1000, "linear_probe/val_acc": 0.22 + s / 900})
        lines.append(row)
        if s == 140:
            lines.append({"step": s, "event": "alert", "rule": "variance_collapse",
                          "severity": "warning", "metric": "target/std_mean", "value": 0.18,
                          "message": message})
    with open(run_dir / "metrics.jsonl", "w") as f:
        for row in lines:
            # The trainer's JsonlWriter puts step and attempt first on every row.
            f.write(json.dumps({"step": row["step"], "attempt": 1, **row}) + "\n")
    return run_dir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited early with code {proc.returncode}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=2):
                return
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


@contextlib.contextmanager
def server(cmd: list[str], port: int, cwd: Path = REPO, log: Path | None = None,
           env: dict | None = None) -> Iterator[str]:
    """Start a server subprocess on 127.0.0.1:port, yield its URL, always kill it afterwards."""
    out = open(log, "w") if log else subprocess.DEVNULL
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                            start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url, proc=proc)
        yield url
    finally:
        # The server was started in its own session, so its group holds only what it spawned.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        if log:
            out.close()


def marimo_run_cmd(notebook: str, port: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "marimo", "run", str(REPO / "notebooks" / notebook), "--headless",
            "--port", str(port), "--host", "127.0.0.1", "--no-token", "--", *args]


def marimo_edit_cmd(notebook: str, port: int, *args: str) -> list[str]:
    """`marimo edit notebooks/NOTEBOOK`, the way the README opens the workbench (no browser, no token)."""
    return [sys.executable, "-m", "marimo", "edit", str(REPO / "notebooks" / notebook), "--headless",
            "--port", str(port), "--host", "127.0.0.1", "--no-token", "--skip-update-check", "--", *args]


def default_marimo_env(home: Path) -> dict[str, str]:
    """Environment for a marimo server with marimo's default user configuration: a fresh HOME and XDG config
    folder, so no personal marimo.toml applies; only the project's pyproject [tool.marimo] does."""
    (home / ".config").mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
