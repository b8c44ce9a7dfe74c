"""What every early-warning rule is made of (design §7): the alert, the rule protocol and the shared plumbing.

Rows are sparse: each rule acts only on rows that carry its metrics and counts *readings*, not steps. Every rule has a
settling time in basic readings (early readings build references but never fire), a patience (consecutive readings
in the condition), per-episode dedup (one alert when the condition starts, re-armed after `rearm_readings` clear
readings) and a runbook-style message. The rules are in `jepa_core.alerts.rules`, the engine that runs them in `.engine`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from jepa_core.alerts.clock import REFERENCE_CLOCK, RunClock
from jepa_core.alerts.detectors import EpisodeGate
from jepa_core.config.rules import RulesConfig
from jepa_core.metrics.stream import TOKEN_TO_FLOAT

__all__ = ["SEVERITIES", "Alert", "Rule", "RuleBase", "fmt", "number", "severity_rank"]

SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")


def severity_rank(severity: str) -> int:
    if severity not in SEVERITIES:
        raise ValueError(f"unknown severity {severity!r}; expected one of {SEVERITIES}")
    return SEVERITIES.index(severity)


@dataclass(frozen=True)
class Alert:
    step: int
    rule: str
    severity: str
    metric: str
    value: float
    message: str

    def to_row(self) -> dict:
        return {
            "step": self.step,
            "event": "alert",
            "rule": self.rule,
            "severity": self.severity,
            "metric": self.metric,
            "value": self.value,
            "message": self.message,
        }


@runtime_checkable
class Rule(Protocol):
    name: str

    def update(self, row: dict) -> list[Alert]: ...


def number(row: dict, key: str) -> float | None:
    """The metric as a float, or None when absent or not numeric (strings for non-finite floats are accepted)."""
    value = row.get(key)
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return TOKEN_TO_FLOAT.get(value)
    return None



def fmt(x: float) -> str:
    return f"{x:.4g}"


class RuleBase:
    """Shared plumbing: one episode gate per rule, alert construction."""

    name = ""
    watches: frozenset[str] = frozenset()  # metric keys this rule reads: the engine skips rows without any

    def __init__(self, cfg: RulesConfig, clock: RunClock = REFERENCE_CLOCK) -> None:
        self.cfg, self.clock = cfg, clock
        self.settle_step = clock.readings(cfg.settle_readings)  # readings before this step never fire
        self.gate = EpisodeGate(rearm=cfg.rearm_readings)

    def _alert(self, step: int, severity: str, metric: str, value: float, message: str) -> Alert:
        return Alert(step=step, rule=self.name, severity=severity, metric=metric, value=value, message=message)

    def _settled_reading(self, row: dict, metric: str) -> float | None:
        """The row's finite value of `metric` once the rules' settling time is over; None otherwise (nothing to judge
        yet)."""
        value = number(row, metric)
        if value is None or not math.isfinite(value) or row["step"] < self.settle_step:
            return None
        return value
