"""The rule engine: every enabled rule of `jepa_core.alerts.rules` over a stream of metric rows, live or replayed."""

from __future__ import annotations

from collections.abc import Iterable

from jepa_core.alerts.base import SEVERITIES, Alert, Rule, severity_rank
from jepa_core.alerts.clock import REFERENCE_CLOCK, RunClock
from jepa_core.alerts.rules import build_rules
from jepa_core.config.rules import RulesConfig
from jepa_core.method.schedules import LrSchedule


class RuleEngine:
    """Runs every enabled rule over a stream of metric rows and remembers what fired."""

    def __init__(self, cfg: RulesConfig | None = None, feature_dim: int | None = None,
                 lr_schedule: LrSchedule | None = None, eval_count: int | None = None,
                 clock: RunClock | None = None) -> None:
        self.cfg = (cfg if cfg is not None else RulesConfig()).validate()
        # Facts of the run's config, not in the stream: the width of the target's features (model.embed_dim) and
        # the lr schedule (optim: lr, start_lr, final_lr, warmup_steps, steps), the images an evaluation scores,
        # and the run's units of time (its basic cadence and length: RunClock.of(config); without them a
        # run of the detection library's typical shape).
        self.feature_dim = feature_dim
        self.clock = clock if clock is not None else REFERENCE_CLOCK
        self.rules: list[Rule] = (build_rules(self.cfg, feature_dim, lr_schedule, eval_count, self.clock)
                                  if self.cfg.enabled else [])
        self.alerts: list[Alert] = []
        self._worst = -1

    def update(self, row: dict) -> list[Alert]:
        if not isinstance(row, dict):
            raise TypeError(f"metric row must be a dict, got {type(row).__name__}")
        if "event" in row:  # alerts and other events are not metrics
            return []
        step = row.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            raise ValueError(f"metric row needs an integer 'step', got {step!r} in {sorted(row)[:8]}")
        fired: list[Alert] = []
        for rule in self.rules:
            watched = getattr(rule, "watches", None)  # optional: a custom Rule without it sees every row
            if watched and watched.isdisjoint(row):
                continue
            fired.extend(rule.update(row))
        for alert in fired:
            self._worst = max(self._worst, severity_rank(alert.severity))
        self.alerts.extend(fired)
        return fired

    def run(self, rows: Iterable[dict]) -> list[Alert]:
        fired: list[Alert] = []
        for row in rows:
            fired.extend(self.update(row))
        return fired

    @property
    def worst_severity(self) -> str | None:
        return SEVERITIES[self._worst] if self._worst >= 0 else None



def evaluate_rows(rows: Iterable[dict], cfg: RulesConfig | None = None, feature_dim: int | None = None,
                  lr_schedule: LrSchedule | None = None, eval_count: int | None = None,
                  clock: RunClock | None = None) -> list[Alert]:
    """Every alert a fresh engine raises over `rows` (e.g. `jepa_core.metrics.stream.iter_rows(path)`);
    `feature_dim`, `lr_schedule`, `eval_count` and `clock` as for RuleEngine."""
    return RuleEngine(cfg, feature_dim, lr_schedule, eval_count, clock).run(rows)
