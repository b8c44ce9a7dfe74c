"""`predictor_collapse` (design §7): the predictor's output spread across the batch gone, within a few readings.

A JEPA predictor that stops reading its context answers every target with about the same vector: the spread of its
outputs over the batch (`pred/std_mean`) falls to a small fraction of what it read a few readings before. A healthy
predictor's spread moves slowly: on the 464 healthy runs of the detection library's rounds 1-40 (every setting and
cadence), its lowest reading from the rules' warm-up on was 0.31 of its highest of the previous 40 steps. An lr
blow-up knocks it down within one reading, often before the target's statistics or the loss move: `smallctx`'s lr
x35 from step 140 (seed 4) read 0.04 of it at 147, 21 steps before the loss jumped (`research/predictor_spread.py`).
A warning: 32 benign fault runs of rounds 1-40 make the same fall and recover.
"""

from __future__ import annotations

import math

from jepa_core.alerts.base import Alert, RuleBase, fmt
from jepa_core.alerts.detectors import RecentHigh
from jepa_core.config.rules import RulesConfig


class PredictorCollapseRule(RuleBase):
    """A warning when `pred/std_mean` reads below `predictor_collapse_fraction` of its highest reading of the last
    `predictor_collapse_window_steps` steps. A non-finite reading is left to non_finite."""

    name = "predictor_collapse"
    metric = "pred/std_mean"

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__(cfg)
        self.watches = frozenset({self.metric})
        self.high = RecentHigh(cfg.predictor_collapse_window_steps)  # warm-up readings included

    def update(self, row: dict) -> list[Alert]:
        cfg, step = self.cfg, row["step"]
        value = row.get(self.metric)
        if cfg.predictor_collapse_fraction <= 0 or not isinstance(value, (int, float)) or isinstance(value, bool) \
                or not math.isfinite(value):
            return []
        high = self.high.update(step, float(value))
        fell = (step >= cfg.warmup_steps and high is not None and high > 0
                and value < cfg.predictor_collapse_fraction * high)
        if self.gate.observe(self.metric, fell, 1):
            return [self._alert(step, "warning", self.metric, float(value), (
                f"predictor collapse: {self.metric} = {fmt(value)} at step {step}, {fmt(value / high)} of its "
                f"{fmt(high)} within {cfg.predictor_collapse_window_steps} steps: the predictor answers every target "
                "with nearly the same vector, so it no longer reads its context. Check first the learning rate (a "
                "blow-up does this within a reading), then the predictor's width and depth; watch the loss and "
                "pred_target/cosine, which follow."))]
        return []
