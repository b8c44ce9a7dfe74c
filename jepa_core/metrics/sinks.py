"""One fan-out metric logger (design §5): JSONL is canonical, TensorBoard / W&B / trackio are optional mirrors.

Every sink opens its file or service lazily, on the first row it receives, so a process that never logs
(rank != 0 under DDP) creates nothing. A mirror that raises is reported with a rate-limited warning and
training goes on; the canonical JSONL sink raising stops training with `MetricSinkError`.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from jepa_core.metrics.stream import JsonlWriter, to_plain_row

log = logging.getLogger(__name__)

_NON_METRIC_KEYS = frozenset({"step", "attempt", "event"})


class MetricSinkError(RuntimeError):
    """The canonical metric stream could not be written: training must stop."""


@runtime_checkable
class Sink(Protocol):
    def log(self, row: dict) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


def numeric_items(row: dict) -> dict[str, float]:
    """The row's scalar metrics as floats (NaN/inf kept), leaving out step, attempt and text fields."""
    out: dict[str, float] = {}
    for key, value in row.items():
        if key in _NON_METRIC_KEYS or isinstance(value, (str, bool)) or value is None:
            continue
        if isinstance(value, (int, float)):
            out[key] = float(value)
    return out


class JsonlSink:
    """The canonical sink: `metrics.jsonl` through a line-atomic `JsonlWriter`. Errors propagate."""

    canonical = True

    def __init__(self, path: str | os.PathLike, attempt: int = 0) -> None:
        self.path = Path(path)
        self.attempt = attempt
        self._writer: JsonlWriter | None = None

    def open(self) -> None:
        if self._writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = JsonlWriter(self.path, self.attempt)

    def log(self, row: dict) -> None:
        self.open()
        assert self._writer is not None
        self._writer.write(row)

    def flush(self) -> None:
        pass  # every row is already one os.write

    def fsync(self) -> None:
        if self._writer is not None:
            self._writer.fsync()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class TensorBoardSink:
    """Scalars as `add_scalar(name, value, step)`; alerts and other events as text."""

    canonical = False

    def __init__(self, log_dir: str | os.PathLike, purge_step: int | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.purge_step = purge_step  # on resume, TensorBoard hides older events from this step on
        self._writer: Any = None

    def _open(self) -> Any:
        if self._writer is None:
            from torch.utils.tensorboard import (
                SummaryWriter,  # heavy import, only when used
            )

            self._writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=self.purge_step)
        return self._writer

    def log(self, row: dict) -> None:
        writer = self._open()
        step = int(row["step"])
        event = row.get("event")
        if event == "alert":
            text = (f"**{row.get('severity', '?')}** `{row.get('rule', '?')}` on `{row.get('metric', '?')}` "
                    f"= {row.get('value')}: {row.get('message', '')}")
            writer.add_text(f"alerts/{row.get('rule', 'unknown')}", text, step)
        elif event is not None:
            details = ", ".join(f"{k}={v}" for k, v in row.items() if k not in _NON_METRIC_KEYS)
            writer.add_text(f"events/{event}", details or str(event), step)
        else:
            for name, value in numeric_items(row).items():
                writer.add_scalar(name, value, step)

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _import_optional(module: str, sink: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"the {sink} sink is enabled but the '{module}' package is not installed; "
                          f"install it (pip install 'jepa-workbench[{extra}]') or turn the sink off") from exc


class WandbSink:
    """Weights & Biases mirror; `wandb` is imported when this sink is constructed, the run starts on first log."""

    canonical = False

    def __init__(self, project: str, name: str | None = None, config: dict | None = None,
                 directory: str | os.PathLike | None = None) -> None:
        self._wandb = _import_optional("wandb", "W&B", "wandb")
        self._init_kwargs = {"project": project, "name": name, "config": config,
                             "dir": str(directory) if directory else None}
        self._run: Any = None

    def log(self, row: dict) -> None:
        if self._run is None:
            self._run = self._wandb.init(**self._init_kwargs)
        step = int(row["step"])
        if row.get("event") == "alert":
            self._run.log({f"alerts/{row.get('rule')}": _as_float(row.get("value"))}, step=step)
        elif row.get("event") is None:
            self._run.log(numeric_items(row), step=step)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self._run is not None:
            self._run.finish()
            self._run = None


class TrackioSink:
    """trackio mirror (wandb-like API); imported when constructed, run started on first log."""

    canonical = False

    def __init__(self, project: str, name: str | None = None, config: dict | None = None) -> None:
        self._trackio = _import_optional("trackio", "trackio", "trackio")
        self._init_kwargs = {"project": project, "name": name, "config": config}
        self._started = False

    def log(self, row: dict) -> None:
        if not self._started:
            self._trackio.init(**self._init_kwargs)
            self._started = True
        step = int(row["step"])
        if row.get("event") == "alert":
            self._trackio.log({f"alerts/{row.get('rule')}": _as_float(row.get("value"))}, step=step)
        elif row.get("event") is None:
            self._trackio.log(numeric_items(row), step=step)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self._started:
            self._trackio.finish()
            self._started = False


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


@dataclass
class _FailureState:
    last_warned: float | None = None
    suppressed: int = 0
    failures: int = 0


class MetricLogger:
    """Fans rows out to every sink. On rank != 0 every call is a no-op."""

    def __init__(self, sinks: list[Sink], rank: int = 0, warn_every_seconds: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sinks = list(sinks)
        self.rank = rank
        self.warn_every_seconds = warn_every_seconds
        self._clock = clock
        self._failures: dict[int, _FailureState] = {}
        self.closed = False
        if self.active:  # fail before training starts if the canonical file cannot be opened
            for sink in self.sinks:
                if _is_canonical(sink) and hasattr(sink, "open"):
                    self._call_canonical(sink, sink.open)

    @property
    def active(self) -> bool:
        return self.rank == 0

    def failure_counts(self) -> dict[str, int]:
        """Failures per non-canonical sink class name so far (for tests and the end-of-run summary)."""
        return {type(self.sinks[i]).__name__: s.failures for i, s in self._failures.items()}

    def log(self, step: int, metrics: dict[str, Any], **fields: Any) -> None:
        if not self.active:
            return
        if type(step) is not int:
            raise TypeError(f"step must be an int, got {type(step).__name__}")
        self._emit({"step": step, **to_plain_row(metrics), **to_plain_row(fields)})

    def alert(self, step: int, rule: str, severity: str, metric: str, value: float, message: str) -> None:
        if not self.active:
            return
        self._emit({"step": int(step), "event": "alert", "rule": rule, "severity": severity, "metric": metric,
                    "value": to_plain_row({"value": value})["value"], "message": message})

    def _emit(self, row: dict) -> None:
        for index, sink in enumerate(self.sinks):
            if _is_canonical(sink):
                self._call_canonical(sink, sink.log, row)
            else:
                self._call_mirror(index, sink, sink.log, row)

    def _call_canonical(self, sink: Sink, method: Callable[..., None], *args: Any) -> None:
        try:
            method(*args)
        except Exception as exc:
            where = getattr(sink, "path", type(sink).__name__)
            raise MetricSinkError(f"cannot write the metric stream {where}: {exc}; training stops here "
                                  f"(rows already written are intact)") from exc

    def _call_mirror(self, index: int, sink: Sink, method: Callable[..., None], *args: Any) -> None:
        try:
            method(*args)
        except Exception as exc:  # a mirror must never stop training: report it, rate-limited
            state = self._failures.setdefault(index, _FailureState())
            state.failures += 1
            now = self._clock()
            if state.last_warned is not None and now - state.last_warned < self.warn_every_seconds:
                state.suppressed += 1
                return
            note = f" ({state.suppressed} similar failures suppressed)" if state.suppressed else ""
            log.warning("metric sink %s failed: %s: %s; training continues%s",
                        type(sink).__name__, type(exc).__name__, exc, note)
            state.last_warned, state.suppressed = now, 0

    def flush(self) -> None:
        if not self.active:
            return
        for index, sink in enumerate(self.sinks):
            if _is_canonical(sink):
                self._call_canonical(sink, sink.flush)
            else:
                self._call_mirror(index, sink, sink.flush)

    def fsync(self) -> None:
        """Make every row so far durable; call before writing a checkpoint."""
        if not self.active:
            return
        self.flush()
        for sink in self.sinks:
            if _is_canonical(sink) and hasattr(sink, "fsync"):
                self._call_canonical(sink, sink.fsync)

    def close(self) -> None:
        if not self.active or self.closed:
            return
        self.closed = True
        for index, sink in enumerate(self.sinks):
            if _is_canonical(sink):
                self._call_canonical(sink, sink.close)
            else:
                self._call_mirror(index, sink, sink.close)

    def __enter__(self) -> MetricLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_canonical(sink: Sink) -> bool:
    return bool(getattr(sink, "canonical", False))
