"""`predictor_collapse` (design §7): the predictor's output spread across the batch gone, within a few readings.

A JEPA predictor that stops reading its context answers every target with about the same vector: the spread of its
outputs over the batch (`pred/std_mean`) falls to a small fraction of what it read a few readings before. A healthy
predictor's spread moves slowly (on the detection library's healthy runs it never fell below about a third of its
recent high); an lr blow-up knocks it down within one reading, often before the target's statistics or the loss
move. A warning: benign lr blow-ups make the same fall and recover.
"""

from __future__ import annotations

import math

from jepa_core.alerts.base import Alert, RuleBase, fmt
from jepa_core.alerts.clock import REFERENCE_CLOCK, RunClock
from jepa_core.alerts.detectors import RecentHigh
from jepa_core.config.rules import RulesConfig


class PredictorCollapseRule(RuleBase):
    """A warning when `pred/std_mean` reads below `predictor_collapse_fraction` of its highest reading of the last
    `recent_high_readings` readings. A non-finite reading is left to non_finite."""

    name = "predictor_collapse"
    metric = "pred/std_mean"

    def __init__(self, cfg: RulesConfig, clock: RunClock = REFERENCE_CLOCK) -> None:
        super().__init__(cfg, clock)
        self.watches = frozenset({self.metric})
        self.window = clock.readings(cfg.recent_high_readings)
        self.high = RecentHigh(self.window)  # settling readings included

    def update(self, row: dict) -> list[Alert]:
        cfg, step = self.cfg, row["step"]
        value = row.get(self.metric)
        if cfg.predictor_collapse_fraction <= 0 or not isinstance(value, (int, float)) or isinstance(value, bool) \
                or not math.isfinite(value):
            return []
        high = self.high.update(step, float(value))
        fell = (step >= self.settle_step and high is not None and high > 0
                and value < cfg.predictor_collapse_fraction * high)
        if self.gate.observe(self.metric, fell, 1):
            return [self._alert(step, "warning", self.metric, float(value), (
                f"predictor collapse: {self.metric} = {fmt(value)} at step {step}, {fmt(value / high)} of its "
                f"{fmt(high)} within {self.window:g} steps: the predictor answers every target "
                "with nearly the same vector, so it no longer reads its context. Check first the learning rate (a "
                "blow-up does this within a reading), then the predictor's width and depth; watch the loss and "
                "pred_target/cosine, which follow."))]
        return []
