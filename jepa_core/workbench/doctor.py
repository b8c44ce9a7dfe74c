"""`jepa doctor RUN`: a health verdict for one run from its metric stream (design §3, §7).

Alerts are the alert rows training already wrote, merged with a fresh evaluation of the rules over the metric rows
(deduplicated by (rule, step, severity)), so a run recorded with old thresholds, or with rules off, is still judged today.
`--rules run` judges with the run's own `[rules]` from its config.toml instead (thresholds a user tuned for an
unusual encoder, say a lower `rank_floor_fraction`); the alerts training wrote are merged either way.
Exit codes: 0 healthy (no alert, or info only), 1 a warning or critical alert, 2 the run cannot be read.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from jepa_core.alerts.base import SEVERITIES, Alert
from jepa_core.alerts.clock import RunClock
from jepa_core.alerts.engine import RuleEngine
from jepa_core.common.console import format_duration, json_terminal_safe, terminal_safe
from jepa_core.config import ConfigError, RulesConfig, load_config
from jepa_core.method.schedules import LrSchedule
from jepa_core.metrics import registry
from jepa_core.metrics.reader import MetricsTable, read_metrics
from jepa_core.metrics.stream import ARCHIVED_STREAM_NAME, STREAM_NAME, encode_row, iter_rows, stream_file
from jepa_core.run import status as run_words
from jepa_core.run.checkpoint import INITIAL, read_digest, verify_checkpoint

__all__ = ["KEY_METRICS", "DoctorReport", "UnreadableRunError", "diagnose", "format_report", "doctor_main",
           "resolve_metrics_path", "run_facts", "run_feature_dim", "run_rules"]

# The early-warning signals a reader wants to see moving (or not) at a glance, in display order: the registry's.
KEY_METRICS: tuple[str, ...] = registry.shown_in("doctor")
FLAT_BAND = 0.1  # a relative change within +-10% between first and last reading reads as "flat"
EXIT_HEALTHY, EXIT_ALERTS, EXIT_UNREADABLE = 0, 1, 2


class UnreadableRunError(ValueError):
    """The run has no readable metric stream; the message names the path and why."""


@dataclass
class DoctorReport:
    run: str  # the metrics file that was read
    verdict: str  # "healthy" | "warning" | "critical"
    alerts: list[Alert] = field(default_factory=list)
    key_metrics: dict[str, Any] = field(default_factory=dict)
    status: str = run_words.UNKNOWN  # the run's status word (jepa_core.run.status), verbatim
    last_step: int | None = None  # the run's own last step (meta.json), not the last logged metric step
    feature_dim: int | None = None  # the features' width from the run's config.toml (None: rank floor off)
    rules: str = "today"  # which thresholds judged it: "today" (this version's defaults) or "run" (its config.toml)
    status_note: str = ""  # why the status is unknown, naming the file, when meta.json is there but unreadable
    # The checkpoints checked against their digests (jepa doctor only; the monitor's list never hashes them):
    # {"intact": [names], "damaged": {name: why}, "newest_step": int | None}; None when there are none to check.
    checkpoints: dict[str, Any] | None = None

    @property
    def resumable(self) -> bool:
        return self.checkpoints is None or bool(self.checkpoints["intact"]) or not self.checkpoints["damaged"]

    @property
    def exit_code(self) -> int:
        return EXIT_HEALTHY if self.verdict == "healthy" and self.resumable else EXIT_ALERTS

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "verdict": self.verdict, "exit_code": self.exit_code, "status": self.status,
                "status_note": self.status_note, "last_step": self.last_step, "feature_dim": self.feature_dim,
                "rules": self.rules, "checkpoints": self.checkpoints, "alerts": [a.to_row() for a in self.alerts],
                "key_metrics": self.key_metrics}


def resolve_metrics_path(run_path: str | Path) -> Path:
    """RUN may be a run directory or a metrics file (metrics.jsonl, or metrics.jsonl.gz for an archived run)."""
    path = Path(run_path)
    if path.is_dir():
        metrics = stream_file(path)
        if not metrics.is_file():
            raise UnreadableRunError(f"{metrics}: run directory has no {STREAM_NAME} (nor {ARCHIVED_STREAM_NAME})")
        return metrics
    if not path.exists():
        raise UnreadableRunError(f"{path}: no such run directory or metrics file")
    if not path.is_file():
        raise UnreadableRunError(f"{path}: not a regular file")
    return path


def _severity_of(text: Any) -> str:
    # An unknown severity written by a foreign tool is judged conservatively, as a warning.
    return text if text in SEVERITIES else "warning"


def _file_alerts(alerts: pd.DataFrame) -> list[Alert]:
    out = []
    for rec in alerts.to_dict("records"):
        value = rec.get("value")
        out.append(Alert(
            step=int(rec["step"]), rule=str(rec.get("rule") or "unknown"), severity=_severity_of(rec.get("severity")),
            metric=str(rec.get("metric") or ""), value=float(value) if value is not None else math.nan,
            message=str(rec.get("message") or "")))
    return out


def _merge(recorded: list[Alert], fresh: list[Alert]) -> list[Alert]:
    """Recorded alerts first (their message is what the user saw live), fresh ones fill the gaps. One rule may raise
    a warning and a critical alert at the same step (ema_stalled: the momentum, then the distance): both are kept."""
    seen: dict[tuple[str, int, str], Alert] = {}
    for alert in recorded + fresh:
        seen.setdefault((alert.rule, alert.step, alert.severity), alert)
    return sorted(seen.values(), key=lambda a: (a.step, -SEVERITIES.index(a.severity), a.rule))


def _trend(first: float, last: float) -> tuple[float | None, str]:
    if first == 0.0:
        return (None, "flat") if last == 0.0 else (None, "rising" if last > 0 else "falling")
    change = (last - first) / abs(first)
    if abs(change) <= FLAT_BAND:
        return change, "flat"
    return change, "rising" if change > 0 else "falling"


def _metric_summary(values: pd.Series) -> dict[str, Any] | None:
    """First/last/min/max, relative change and trend over the finite readings (None when there are none)."""
    finite = [float(v) for v in values if math.isfinite(v)]  # NaN = not logged in this row (or a NaN reading)
    if not finite:
        return None
    change, trend = _trend(finite[0], finite[-1])
    return {"first": finite[0], "last": finite[-1], "min": min(finite), "max": max(finite),
            "relative_change": change, "trend": trend, "readings": len(finite)}


def _key_metrics(scalars: pd.DataFrame, torn: int, bad: int) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for name in KEY_METRICS:
        if name not in scalars.columns:
            continue
        column = scalars[name]
        summary = _metric_summary(column)
        if summary is None:
            continue
        # NaN readings are indistinguishable from "not logged in this row" in the columnar table, so infinities
        # are counted here and NaNs come from the rules' non_finite alerts.
        summary["infinite"] = int(((column == math.inf) | (column == -math.inf)).sum())
        metrics[name] = summary
    steps = scalars["step"] if "step" in scalars.columns else pd.Series(dtype="int64")
    throughput: dict[str, float | None] = {"samples_per_second_last": None, "samples_per_second_median": None,
                                           "eta_seconds_last": None, "step_seconds_median": None}
    for column, key, how in (("time/samples_per_second", "samples_per_second_last", "last"),
                             ("time/samples_per_second", "samples_per_second_median", "median"),
                             ("time/eta_seconds", "eta_seconds_last", "last"),
                             ("time/step_seconds", "step_seconds_median", "median")):
        if column in scalars.columns:
            finite = [float(v) for v in scalars[column].dropna() if math.isfinite(v)]
            if finite:
                throughput[key] = finite[-1] if how == "last" else statistics.median(finite)
    return {
        "steps": {"first": int(steps.min()) if len(steps) else None, "last": int(steps.max()) if len(steps) else None,
                  "rows": int(len(scalars))},
        "metrics": metrics,
        "throughput": throughput,
        "torn_lines": torn,
        "bad_lines": bad,
    }


def diagnose(run_path: str | Path, cfg: RulesConfig | None = None, own_rules: bool = False,
             check_checkpoints: bool = False) -> DoctorReport:
    """Read a run (directory, metrics.jsonl or metrics.jsonl.gz), re-run the rules, merge recorded alerts, summarise
    key metrics. `own_rules`: judge with the run's own [rules] (its config.toml) rather than `cfg` or the defaults.

    Raises UnreadableRunError (naming the path) when there is nothing to judge: missing, empty or all garbage, or
    (own_rules) no readable config.toml. `check_checkpoints` hashes every checkpoint against its digest (jepa
    doctor; seconds for large ones, so the monitor's run list leaves it out).
    """
    path = resolve_metrics_path(run_path)
    facts = run_facts(path.parent)
    feature_dim = facts["feature_dim"]
    if own_rules:
        cfg = run_rules(path.parent)
    try:
        table = read_metrics(path)
        engine = RuleEngine(cfg, **facts)
        fresh = engine.run(row for row in iter_rows(path) if "event" not in row)
    except OSError as exc:
        raise UnreadableRunError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if table.scalars.empty and table.alerts.empty:
        if table.bad_lines:
            line, reason = table.bad_lines[0]
            raise UnreadableRunError(f"{path}: no readable metric rows ({len(table.bad_lines)} bad lines; "
                                     f"line {line}: {reason})")
        raise UnreadableRunError(f"{path}: no metric rows ({_what_is_there(path, table)})")
    alerts = _merge(_file_alerts(table.alerts), fresh)
    worst = max((SEVERITIES.index(a.severity) for a in alerts), default=0)
    verdict = "healthy" if worst <= SEVERITIES.index("info") else SEVERITIES[worst]
    key_metrics = _key_metrics(table.scalars, table.torn_lines, len(table.bad_lines))
    status, last_step, status_note = _run_status(path, key_metrics.get("steps", {}).get("last"))
    return DoctorReport(run=str(path), verdict=verdict, alerts=alerts, key_metrics=key_metrics, status=status,
                        last_step=last_step, feature_dim=feature_dim, rules="run" if own_rules else "today",
                        status_note=status_note,
                        checkpoints=checkpoint_health(path.parent) if check_checkpoints else None)


def run_rules(run_dir: Path) -> RulesConfig:
    """The [rules] the run was configured with, from its config.toml; UnreadableRunError naming the file if there is
    none or it does not load."""
    config = run_dir / "config.toml"
    if not config.is_file():
        raise UnreadableRunError(f"{config}: not found, so the run's own rules are unknown (judge with today's: "
                                 "leave out --rules run)")
    try:
        return load_config(config).rules.validate()
    except (OSError, ValueError, ConfigError) as exc:
        raise UnreadableRunError(f"{config}: the run's own rules do not load: {exc}") from exc


def run_facts(run_dir: Path) -> dict[str, int | LrSchedule | RunClock | None]:
    """What the rules need from the run's config.toml and the stream does not carry, as RuleEngine's keywords: the
    width of the target's features (model.embed_dim; rank_collapse's floor) and the lr schedule (optim; online_collapse
    waits out its warm-up, ema_runaway judges feature-distance jumps against it) and the probe-val count
    (eval_regression's binomial noise for streams that did not measure theirs) and its clock (the rules' units of
    time: basic cadence and length). None without a readable config (the verdict then rests on the stream, and
    time on the reference clock)."""
    try:
        cfg = load_config(run_dir / "config.toml")
    except (OSError, ValueError, ConfigError):
        return {"feature_dim": None, "lr_schedule": None, "eval_count": None, "clock": None}
    # The probe-val half of the held-out split: known from the config alone for the shapes (a fraction of a folder
    # or archive is only known once it is read; new runs measure their evaluation noise instead).
    eval_count = cfg.data.num_heldout - cfg.data.num_heldout // 2 if cfg.data.dataset == "shapes" else None
    return {"feature_dim": cfg.model.embed_dim, "lr_schedule": LrSchedule.of(cfg.optim), "eval_count": eval_count,
            "clock": RunClock.of(cfg)}


def run_feature_dim(run_dir: Path) -> int | None:
    """The width of the target's features (model.embed_dim) from the run's config.toml; None without one."""
    return run_facts(run_dir)["feature_dim"]


def _run_status(metrics: Path, stream_last: int | None) -> tuple[str, int | None, str]:
    """The status word and last step of the run that holds `metrics`, from its meta.json, and why the status is
    unknown when meta.json is there but unreadable (naming it; a recorded stream without one says nothing). The
    verdict never depends on it."""
    path = metrics.parent / "meta.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return run_words.UNKNOWN, stream_last, ""
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        return run_words.UNKNOWN, stream_last, f"{path} is unreadable ({why})"
    if not isinstance(meta, dict):
        return run_words.UNKNOWN, stream_last, f"{path} holds a JSON {type(meta).__name__}, not an object"
    status = run_words.run_status(meta, metrics.stat().st_mtime, path=metrics.parent)
    return status, run_words.run_last_step(meta, stream_last), ""


def checkpoint_health(run_dir: Path) -> dict[str, Any] | None:
    """Every checkpoint a resume could start from (latest.pt, step_*.pt) checked against its digest, and init.pt
    (the drift diagnostic's reference, never a resume point) when it has a digest. None without any."""
    folder = run_dir / "checkpoints"
    files = sorted(p for p in folder.glob("*.pt") if p.name != INITIAL) if folder.is_dir() else []
    if not files:
        return None
    intact, damaged, newest = [], {}, None
    for path in files:
        why = verify_checkpoint(path)
        if why is not None:
            damaged[path.name] = why
            continue
        intact.append(path.name)
        step = (read_digest(path) or {}).get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            newest = step if newest is None else max(newest, step)
    init = folder / INITIAL
    init_damage = verify_checkpoint(init) if init.is_file() and read_digest(init) is not None else None
    return {"intact": intact, "damaged": damaged, "newest_step": newest, "initial_weights": init_damage}


def _what_is_there(path: Path, table: MetricsTable) -> str:
    """Why a readable file judged nothing: empty, blank lines, a torn write, or events without metrics."""
    if path.stat().st_size == 0:
        return "the file is empty"
    if len(table.events):
        return f"only {len(table.events)} event row{'s' if len(table.events) != 1 else ''}"
    if table.torn_lines:
        return "only blank lines and a torn last line, as a writer killed mid-line leaves"
    return "only blank lines"


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}"


def format_report(report: DoctorReport) -> str:
    """Human-readable verdict, key metrics table and every alert with its runbook line.

    Every string that came from the run (its path, rule and metric names, messages) is passed through
    terminal_safe: a metrics file is data, and must not be able to drive the terminal it is printed to."""
    counts = {s: sum(a.severity == s for a in report.alerts) for s in SEVERITIES}
    parts = [f"{counts[s]} {s}" for s in reversed(SEVERITIES) if counts[s]]
    note = f" ({', '.join(parts)} alert{'s' if len(report.alerts) != 1 else ''})" if parts else " (no alerts)"
    if report.verdict == "healthy" and counts["info"]:
        note += "; info alerts alone do not make a run unhealthy"
    km = report.key_metrics
    steps, tp = km.get("steps", {}), km.get("throughput", {})
    last = "?" if report.last_step is None else report.last_step
    lines = [f"jepa doctor: {terminal_safe(report.run)}", f"verdict: {report.verdict.upper()}{note}",
             f"run status: {report.status}" + (f" ({terminal_safe(report.status_note)})" if report.status_note else "")
             + f", last step {last}"
             + ("" if report.feature_dim else "; no readable config.toml beside the stream: the rank floor is off, "
                "online_collapse does not wait out the lr warm-up, and ema_runaway reads the feature distance's "
                "jumps raw, without the lr schedule's own growth"),
             "judged with " + ("the thresholds in the run's own config.toml ([rules])" if report.rules == "run" else
                               "this version's default rules (add --rules run to judge with the thresholds in the "
                               "run's config.toml)"),
             f"steps {steps.get('first')}..{steps.get('last')} ({steps.get('rows')} metric rows, "
             f"{km.get('torn_lines', 0)} torn, {km.get('bad_lines', 0)} bad lines)"]
    if report.checkpoints is not None:
        lines.append(_checkpoint_line(report.checkpoints))
    if tp.get("samples_per_second_last") is not None or tp.get("eta_seconds_last") is not None:
        # An ETA only means something while the run can still go on.
        eta = f", ETA {format_duration(tp.get('eta_seconds_last'))}" if report.status in run_words.LIVE else ""
        lines.append(f"throughput {_num(tp.get('samples_per_second_last'))} samples/s (median "
                     f"{_num(tp.get('samples_per_second_median'))}){eta}")
    metrics = km.get("metrics", {})
    if metrics:
        lines += ["", f"  {'metric':<30}{'first':>11}{'last':>11}{'change':>9}  trend"]
        for name, m in metrics.items():
            change = "-" if m["relative_change"] is None else f"{100 * m['relative_change']:+.0f}%"
            lines.append(f"  {terminal_safe(name):<30}{_num(m['first']):>11}{_num(m['last']):>11}{change:>9}  {m['trend']}")
    if report.alerts:
        lines += ["", "alerts:"]
        for a in report.alerts:
            lines.append(f"  step {a.step:>7}  {terminal_safe(a.severity.upper()):<8} {terminal_safe(a.rule)}  "
                         f"({terminal_safe(a.metric)} = {_num(a.value)})")
            lines.append(f"      {terminal_safe(a.message)}")
    return "\n".join(lines)


def _checkpoint_line(health: dict[str, Any]) -> str:
    intact, damaged = health["intact"], health["damaged"]
    total = len(intact) + len(damaged)
    if not damaged:
        head = f"checkpoints: all {total} intact"
    elif intact:
        head = f"checkpoints: {len(intact)} of {total} intact"
    else:
        head = f"checkpoints: NONE of {total} intact: --resume would start again from step 0"
    newest = f", newest at step {health['newest_step']}" if health["newest_step"] is not None else ""
    bad = "; ".join(f"{terminal_safe(name)} {terminal_safe(why)}" for name, why in damaged.items())
    init = health.get("initial_weights")
    init_words = (f"; {INITIAL} {terminal_safe(init)} (a resume measures weight drift from its own weights)"
                  if init else "")
    return head + newest + (f"; damaged: {bad}" if bad else "") + init_words


def doctor_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jepa doctor",
                                     description="Health verdict and alerts of a run (exit 0 healthy, 1 alerts or no "
                                                 "intact checkpoint left, 2 unreadable).")
    parser.add_argument("run", help="run directory, metrics.jsonl file, or an archived metrics.jsonl.gz")
    parser.add_argument("--json", action="store_true", help="print the report as one strict JSON object")
    parser.add_argument("--rules", choices=("today", "run"), default="today",
                        help="thresholds to judge with: today's defaults (default) or the run's own [rules] from its "
                             "config.toml")
    args = parser.parse_args(argv)
    try:
        report = diagnose(args.run, own_rules=args.rules == "run", check_checkpoints=True)
    except UnreadableRunError as exc:
        print(f"jepa doctor: {terminal_safe(str(exc))}", file=sys.stderr)
        return EXIT_UNREADABLE
    print(json_terminal_safe(encode_row(report.to_dict())) if args.json else format_report(report))
    return report.exit_code


if __name__ == "__main__":
    from jepa_core.common.console import exit_quietly_on_broken_pipe

    sys.exit(exit_quietly_on_broken_pipe(doctor_main))
