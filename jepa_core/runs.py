"""Finding run directories (SPEC §4) and summarising them for the notebooks and reports.

Discovery is cheap on purpose: it reads meta.json and only the tail of metrics.jsonl, so listing a
folder of long runs costs the same as listing short ones.
"""

from __future__ import annotations

import json
import os
import socket
import time
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from jepa_core.console import format_duration

DEFAULT_ROOTS: tuple[str, ...] = ("runs", "data/runs")
# A run whose meta says "running" but whose stream has not moved for this long, and whose process
# cannot be seen, is reported as crashed.
STALE_SECONDS = 120.0
_TAIL_BYTES = 65536
_FINISHED = {"finished", "completed", "done", "stopped"}
_CRASHED = {"crashed", "failed", "error", "killed", "diverged"}


@dataclass(frozen=True)
class RunInfo:
    """One run directory as the run picker shows it."""

    name: str
    path: Path
    status: str  # running | finished | crashed | unknown
    steps: int | None  # last step written to metrics.jsonl
    last_update: float | None  # mtime of metrics.jsonl (or of the directory), epoch seconds

    @property
    def label(self) -> str:
        steps = "?" if self.steps is None else str(self.steps)
        return f"{self.name} [{self.status}, step {steps}] ({self.path.parent})"


@dataclass
class RunSummary:
    """Everything a report header shows about a run."""

    name: str
    path: Path
    status: str
    steps: int | None
    config: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    duration_seconds: float | None = None
    device: str = "unknown"
    verdict: str | None = None
    faults: list[str] = field(default_factory=list)


def is_run_dir(path: Path) -> bool:
    """A run directory holds at least a metrics stream or a meta.json."""
    return path.is_dir() and ((path / "metrics.jsonl").is_file() or (path / "meta.json").is_file())


def read_json_file(path: Path) -> dict[str, Any]:
    """A JSON object from `path`; {} if missing. Malformed JSON raises naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: malformed JSON at line {exc.lineno}: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_config_file(path: Path) -> dict[str, Any]:
    """The run's resolved config.toml as nested dicts; {} if missing. Bad TOML raises naming the file."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: malformed TOML: {exc}") from exc


def last_logged_step(metrics_path: Path) -> int | None:
    """The `step` of the last complete line of metrics.jsonl, reading only the file's tail."""
    try:
        with open(metrics_path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _TAIL_BYTES))
            tail = fh.read()
    except FileNotFoundError:
        return None
    # The last line may be torn (a crash mid-write): only lines ending in a newline count.
    complete = tail[: tail.rfind(b"\n") + 1].splitlines()
    for raw in reversed(complete):
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            return row["step"]
    return None


def pid_alive(pid: Any) -> bool:
    """Whether a process with this id exists on this machine."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def run_status(meta: dict[str, Any], last_update: float | None, now: float | None = None) -> str:
    """running / finished / crashed / unknown from meta.json's status, its pid and the stream's mtime."""
    declared = str(meta.get("status", "")).lower()
    if declared in _FINISHED:
        return "finished"
    if declared in _CRASHED:
        return "crashed"
    if declared != "running":
        return "unknown"
    now = time.time() if now is None else now
    fresh = last_update is not None and now - last_update < STALE_SECONDS
    same_host = meta.get("hostname") in (None, socket.gethostname())
    if same_host and "pid" in meta:
        # On this machine the process table is the truth; the mtime covers a slow step.
        return "running" if pid_alive(meta["pid"]) else "crashed"
    return "running" if fresh else "crashed"


def run_info(path: Path) -> RunInfo:
    """Summarise one run directory for a picker (cheap: meta.json and the stream's tail)."""
    path = Path(path)
    metrics = path / "metrics.jsonl"
    try:
        last_update: float | None = metrics.stat().st_mtime
    except FileNotFoundError:
        last_update = path.stat().st_mtime if path.exists() else None
    try:
        meta = read_json_file(path / "meta.json")
    except ValueError:
        meta = {}
    status = run_status(meta, last_update) if meta else "unknown"
    return RunInfo(name=path.name, path=path, status=status, steps=last_logged_step(metrics),
                   last_update=last_update)


def discover_runs(roots: Iterable[str | Path] = DEFAULT_ROOTS) -> list[RunInfo]:
    """Run directories directly under each root (missing roots are skipped), newest first."""
    found: list[RunInfo] = []
    seen: set[Path] = set()
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        candidates = [root] if is_run_dir(root) else sorted(root.iterdir())
        for child in candidates:
            if child.name.startswith(".") or not is_run_dir(child):
                continue  # dot-folders are the trainer's half-built staging directories
            resolved = child.resolve()
            if resolved in seen:
                continue
            seen.add(resolved)
            found.append(run_info(child))
    found.sort(key=lambda r: r.last_update or 0.0, reverse=True)
    return found


def _timestamp(value: Any) -> float | None:
    """Epoch seconds from a number or an ISO 8601 string; None otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    return None


def run_duration(meta: dict[str, Any], status: str, last_update: float | None) -> float | None:
    """Wall-clock seconds from start to end (or to the last write, for a run still going or crashed)."""
    start = _timestamp(meta.get("start_time"))
    if start is None:
        return None
    end = _timestamp(meta.get("end_time"))
    if end is None:
        end = last_update if last_update is not None else time.time()
    return max(0.0, end - start)


def load_run_summary(path: str | Path, with_verdict: bool = True) -> RunSummary:
    """Config, meta, status, duration, device and (optionally) the doctor's verdict for one run."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"run directory {path} does not exist")
    info = run_info(path)
    meta = read_json_file(path / "meta.json")
    config = read_config_file(path / "config.toml")
    faults = meta.get("faults")
    if not isinstance(faults, list):
        faults = []
    verdict = None
    if with_verdict and (path / "metrics.jsonl").is_file():
        from jepa_core.doctor import diagnose  # imported late: the doctor pulls in the rule engine

        verdict = str(diagnose(path).verdict)
    return RunSummary(
        name=str(meta.get("name") or path.name), path=path, status=info.status, steps=info.steps,
        config=config, meta=meta, duration_seconds=run_duration(meta, info.status, info.last_update),
        device=str(meta.get("device_name") or meta.get("device") or "unknown"),
        verdict=verdict, faults=[str(f) for f in faults],
    )


# Config keys a report header lists, in order: (section, key, label).
_SUMMARY_KEYS: tuple[tuple[str, str, str], ...] = (
    ("model", "embed_dim", "embed dim"), ("model", "depth", "depth"),
    ("model", "img_size", "image size"), ("model", "patch_size", "patch size"),
    ("data", "dataset", "dataset"), ("optim", "steps", "steps"),
    ("optim", "batch_size", "batch size"), ("optim", "lr", "lr"),
    ("ema", "start", "EMA start"), ("ema", "end", "EMA end"),
    ("masks", "target_scale", "target scale"), ("masks", "context_scale", "context scale"),
    ("runtime", "seed", "seed"),
)


def config_summary(config: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) pairs for the header; keys missing from the config are left out."""
    pairs = []
    for section, key, label in _SUMMARY_KEYS:
        block = config.get(section)
        if isinstance(block, dict) and key in block:
            pairs.append((label, str(block[key])))
    return pairs


def default_run(roots: Iterable[str | Path] = ("data/runs", "runs")) -> Path | None:
    """The run a notebook opens when none is named: a shipped healthy run if present, else the first."""
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        candidates = sorted(p for p in root.iterdir() if not p.name.startswith(".") and is_run_dir(p))
        healthy = [p for p in candidates if "healthy" in p.name]
        if healthy or candidates:
            return (healthy or candidates)[0]
    return None


def run_argument(argv: list[str]) -> str | None:
    """The value of `--run PATH` (or `--run=PATH`) in a notebook's argv; other arguments are ignored.

    Notebooks read sys.argv through this rather than `mo.cli_args()`, which splits a value at "="
    (marimo 0.25: `--run "a b=c"` comes back as {"run a b": "c"}).
    """
    import argparse

    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--run", default=None)
    known, _ = parser.parse_known_args(argv)
    return known.run


def resolve_run(cli_value: str | None, env_value: str | None = None,
                roots: Iterable[str | Path] = ("data/runs", "runs")) -> Path | None:
    """The run a notebook shows: `-- --run PATH`, else $JEPA_RUN, else `default_run(roots)`.

    A named path that is not a run directory raises, naming it, rather than silently showing another run.
    """
    named = cli_value or env_value
    if named:
        path = Path(named)
        if not is_run_dir(path):
            raise FileNotFoundError(f"--run {named}: not a run directory (no metrics.jsonl or meta.json)")
        return path
    return default_run(roots)


def summary_markdown(summary: RunSummary) -> str:
    """The report header as Markdown; every string from the run's files is HTML-escaped."""
    from jepa_core.charts import safe_text

    steps = "?" if summary.steps is None else str(summary.steps)
    lines = [
        f"# Run report: {safe_text(summary.name)}",
        "",
        "| | |",
        "| --- | --- |",
        f"| status | **{safe_text(summary.status)}** |",
        f"| doctor verdict | **{safe_text(summary.verdict or 'not computed')}** |",
        f"| last step | {steps} |",
        f"| duration | {format_duration(summary.duration_seconds)} |",
        f"| device | {safe_text(summary.device)} |",
        f"| faults injected | {safe_text(', '.join(summary.faults) or 'none')} |",
        f"| path | {safe_text(summary.path)} |",
    ]
    config_pairs = config_summary(summary.config)
    if config_pairs:
        lines += ["", "**Config**: " + ", ".join(f"{safe_text(k)} = {safe_text(v)}" for k, v in config_pairs)]
    return "\n".join(lines)


@dataclass
class LiveTable:
    """The MetricsTable shape (scalars, alerts) built incrementally from followed rows."""

    scalars: pd.DataFrame
    alerts: pd.DataFrame


class LiveRun:
    """One run kept up to date for the monitor: a finished run is read once; a live one is followed.

    Following reads only the bytes appended since the last poll (jepa_core.stream.MetricsFollower),
    appends them to the frames, and re-applies the resume purge when a newer attempt starts.
    """

    def __init__(self, path: str | Path) -> None:
        from jepa_core.stream import MetricsFollower, read_metrics

        self.path = Path(path)
        self.metrics_path = self.path / "metrics.jsonl"
        self.follower: MetricsFollower | None = None
        info = run_info(self.path)
        if info.status == "running" or not self.metrics_path.is_file():
            self.follower = MetricsFollower(self.metrics_path)
            self.table = LiveTable(_empty_scalars(), _empty_alerts())
            self.poll()
        else:
            table = read_metrics(self.metrics_path)
            self.table = LiveTable(table.scalars, table.alerts)

    @property
    def name(self) -> str:
        return self.path.name

    def poll(self) -> bool:
        """Read what was appended since the last poll; True when the table changed."""
        from jepa_core.stream import apply_resume_purge

        if self.follower is None:
            return False
        update = self.follower.poll_update()
        if update.reset:
            self.table = LiveTable(_empty_scalars(), _empty_alerts())
        if not update.rows:
            return update.reset
        metric_rows = [r for r in update.rows if "event" not in r]
        alert_rows = [r for r in update.rows if r.get("event") == "alert"]
        scalars, alerts = self.table.scalars, self.table.alerts
        if metric_rows:
            new = pd.DataFrame(metric_rows)
            new = new.loc[:, [c for c in new.columns if new[c].dtype.kind in "iufb"]]
            scalars = pd.concat([scalars, new], ignore_index=True) if len(scalars) else new
        if alert_rows:
            new_alerts = pd.DataFrame([{**{c: r.get(c) for c in _ALERT_COLUMNS}, "attempt": r.get("attempt", 0)}
                                       for r in alert_rows],
                                      columns=list(_ALERT_COLUMNS))
            alerts = pd.concat([alerts, new_alerts], ignore_index=True) if len(alerts) else new_alerts
        if update.purge_from_step is not None:
            scalars = apply_resume_purge(scalars).reset_index(drop=True)
            if len(alerts):
                alerts = apply_resume_purge(alerts.astype({"attempt": "int64"})).reset_index(drop=True)
        if "attempt" not in scalars.columns:
            scalars.insert(1, "attempt", 0)
        self.table = LiveTable(scalars, alerts)
        return True


_ALERT_COLUMNS = ("step", "attempt", "rule", "severity", "metric", "value", "message")


def _empty_scalars() -> pd.DataFrame:
    return pd.DataFrame({"step": np.array([], dtype=np.int64), "attempt": np.array([], dtype=np.int64)})


def _empty_alerts() -> pd.DataFrame:
    return pd.DataFrame(columns=list(_ALERT_COLUMNS))


# ---------------------------------------------------------------- launching runs from the workbench


def form_overrides(values: dict[str, Any]) -> list[str]:
    """`section.key=value` strings (TOML values) for `apply_overrides` or `jepa train --set`.

    JSON spells numbers, booleans, strings and lists the way TOML does, so json.dumps is the encoder.
    """
    out = []
    for key, value in values.items():
        if "." not in key:
            raise ValueError(f"override key {key!r} must be section.key")
        if isinstance(value, tuple):
            value = list(value)
        out.append(f"{key}={json.dumps(value)}")
    return out


@dataclass(frozen=True)
class DetachedRun:
    """A `jepa train` process started from the notebook; it outlives the browser tab."""

    pid: int
    run_dir: Path
    log_path: Path
    # Kept so the launcher can poll() it: that reaps the exited child, which would otherwise linger as
    # a zombie that still answers pid_alive.
    process: Any = field(default=None, compare=False, repr=False)

    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None


def launch_detached(overrides: list[str], name: str, preset_name: str = "tiny",
                    runs_dir: str | Path = "runs") -> DetachedRun:
    """Start `python -m jepa_core.train` in its own session (closing the tab or the kernel leaves it running).

    Console output goes to `<runs_dir>/.logs/<name>.log` (a dot-folder, so discovery ignores it).
    """
    import subprocess
    import sys

    runs_dir = Path(runs_dir)
    if (runs_dir / name).exists():
        raise FileExistsError(f"run directory {runs_dir / name} already exists: pick another name")
    log_dir = runs_dir / ".logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    cmd = [sys.executable, "-m", "jepa_core.train", "--preset", preset_name, "--name", name, "--quiet",
           "--set", f"logging.runs_dir={json.dumps(str(runs_dir))}"]
    for override in overrides:
        cmd += ["--set", override]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    return DetachedRun(pid=proc.pid, run_dir=runs_dir / name, log_path=log_path, process=proc)
