"""Finding run directories (design §4) and summarising them for the notebooks and reports.

Discovery is cheap on purpose: it reads meta.json and only the tail of metrics.jsonl, so listing a
folder of long runs costs the same as listing short ones. Status words are jepa_core.run.status's,
shown verbatim; a run whose meta says it is live but whose writer is gone reads "crashed".
A damaged meta.json or config.toml never stops a run from being listed or reported: what could not be
read is left out and named in the run's `problems`.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from jepa_core.metrics.stream import GZIP_SUFFIX, _blocks, stream_file  # _blocks: as jepa_core.metrics.reader
from jepa_core.run import status as run_status_words
from jepa_core.run.status import run_last_step, run_status

DEFAULT_ROOTS: tuple[str, ...] = ("runs", "data/runs")
_TAIL_BYTES = 65536


@dataclass(frozen=True)
class RunInfo:
    """One run directory as the run picker shows it."""

    name: str
    path: Path
    status: str  # a word of jepa_core.run.status (running, paused, stopped, ..., crashed) or "unknown"
    steps: int | None  # the run's last step: meta.json's last_step once ended, else the stream's last step
    last_update: float | None  # mtime of metrics.jsonl (or of the directory), epoch seconds
    problems: tuple[str, ...] = ()  # files that could not be read, each named with what is wrong

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
    problems: list[str] = field(default_factory=list)  # damaged files, named; the header shows them


def is_run_dir(path: Path) -> bool:
    """A run directory holds at least a metrics stream (plain or archived) or a meta.json."""
    return path.is_dir() and (stream_file(path).is_file() or (path / "meta.json").is_file())


def read_json_file(path: Path) -> dict[str, Any]:
    """A JSON object from `path`; {} if missing. Malformed JSON or bad UTF-8 raises ValueError naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not valid UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: malformed JSON at line {exc.lineno}: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_config_file(path: Path) -> dict[str, Any]:
    """The run's resolved config.toml as nested dicts; {} if missing. Bad UTF-8 or TOML raises naming the file."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not valid UTF-8 (byte {exc.start})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: malformed TOML: {exc}") from exc
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply to read") from None


def read_meta_lenient(path: Path) -> tuple[dict[str, Any], list[str]]:
    """meta.json of run `path` and the problems met reading it: ({}, [message naming the file]) when damaged."""
    try:
        return read_json_file(path / "meta.json"), []
    except ValueError as exc:  # names the file already
        return {}, [str(exc)]
    except OSError as exc:  # unreadable (permissions, a folder in its place)
        return {}, [f"{path / 'meta.json'}: {exc.strerror or exc}"]


def branch_of(path: str | Path) -> tuple[Path, int] | None:
    """(parent run directory, branch step) when the run at `path` is a branch (`jepa rewind`) whose parent is still
    there; None otherwise, also for a damaged meta.json (the header names it)."""
    from jepa_core.run.branch import branch_parent

    meta, _ = read_meta_lenient(Path(path))
    return branch_parent(Path(path), meta)


def last_logged_step(metrics_path: Path) -> int | None:
    """The `step` of the last complete line of metrics.jsonl, reading only the file's tail (an archive, which has no
    tail to seek to, is inflated through once, keeping only its last block)."""
    try:
        tail = _archive_tail(metrics_path) if metrics_path.suffix == GZIP_SUFFIX else _file_tail(metrics_path)
    except FileNotFoundError:
        return None
    # The last line may be torn (a crash mid-write, a copy cut short): only lines ending in a newline count.
    complete = tail[: tail.rfind(b"\n") + 1].splitlines()
    for raw in reversed(complete):
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            return row["step"]
    return None


def _file_tail(path: Path) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - _TAIL_BYTES))
        return fh.read()


def _archive_tail(path: Path) -> bytes:
    """The last whole lines of a gzipped stream, through the readers' own block reader (missing, or not gzip: none)."""
    tail = b""
    try:
        for data, end in _blocks(path, _TAIL_BYTES):
            if end > 0:
                tail = data[:end]
    except OSError:
        return b""
    return tail


def run_info(path: Path) -> RunInfo:
    """Summarise one run directory for a picker (cheap: meta.json and the stream's tail)."""
    path = Path(path)
    metrics = stream_file(path)
    try:
        last_update: float | None = metrics.stat().st_mtime
    except FileNotFoundError:
        last_update = path.stat().st_mtime if path.exists() else None
    meta, problems = read_meta_lenient(path)
    status = run_status(meta, last_update, path=path) if meta else run_status_words.UNKNOWN
    if status == run_status_words.CRASHED and run_status_words.normalise(meta.get("status")) in run_status_words.LIVE:
        # A writer records its final status before it lets the lock go: between our read of meta.json and our look
        # at the lock it may have done both. Read meta once more before calling the run crashed.
        meta, problems = read_meta_lenient(path)
        status = run_status(meta, last_update, path=path) if meta else run_status_words.UNKNOWN
    steps = run_last_step(meta, last_logged_step(metrics))
    return RunInfo(name=path.name, path=path, status=status, steps=steps, last_update=last_update,
                   problems=tuple(problems))


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
    """Config, meta, status, duration, device and (optionally) the doctor's verdict for one run.

    A damaged meta.json or config.toml is left out and named in `problems`; only a missing directory raises.
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"run directory {path} does not exist")
    info = run_info(path)
    meta, problems = read_meta_lenient(path)
    try:
        config = read_config_file(path / "config.toml")
    except ValueError as exc:
        config = {}
        problems.append(str(exc))
    except OSError as exc:
        config = {}
        problems.append(f"{path / 'config.toml'}: {exc.strerror or exc}")
    faults = meta.get("faults")
    if not isinstance(faults, list):
        faults = []
    verdict = None
    if with_verdict and stream_file(path).is_file():
        from jepa_core.workbench.doctor import (
            diagnose,  # imported late: the doctor pulls in the rule engine
        )

        try:
            verdict = str(diagnose(path).verdict)
        except (ValueError, OSError) as exc:
            problems.append(f"{stream_file(path)}: the doctor could not read it: {exc}")
    return RunSummary(
        name=str(meta.get("name") or path.name), path=path, status=info.status, steps=info.steps,
        config=config, meta=meta, duration_seconds=run_duration(meta, info.status, info.last_update),
        device=str(meta.get("device_name") or meta.get("device") or "unknown"),
        verdict=verdict, faults=[str(f) for f in faults], problems=problems,
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


def load_run_table(path: str | Path) -> tuple[Any, list[str]]:
    """The run's metrics as a MetricsTable, and problems worth showing (no stream, skipped lines).

    A run without a metrics.jsonl yet (or with an unreadable one) gives an empty table, so a report or a
    monitor still shows its header."""
    import numpy as np
    import pandas as pd

    from jepa_core.metrics.reader import MetricsTable, read_metrics
    from jepa_core.metrics.stream import ALERT_COLUMNS

    metrics = stream_file(path)
    try:
        table = read_metrics(metrics)
    except FileNotFoundError:
        problems = [f"{metrics}: missing; no metrics logged yet"]
    except OSError as exc:
        problems = [f"{metrics}: {exc.strerror or exc}"]
    else:
        problems = []
        if table.bad_lines:
            first_line, why = table.bad_lines[0]
            problems.append(f"{metrics}: {len(table.bad_lines)} malformed line(s) skipped, the first at line "
                            f"{first_line}: {why}")
        return table, problems
    ints = {"step": np.array([], dtype=np.int64), "attempt": np.array([], dtype=np.int64)}
    empty = MetricsTable(scalars=pd.DataFrame(ints), alerts=pd.DataFrame(columns=list(ALERT_COLUMNS)),
                         events=pd.DataFrame({**ints, "event": pd.Series(dtype=object)}))
    return empty, problems
