"""The representation-collapse rules of design §7: `variance_collapse`, `steady_collapse`, `rank_collapse`,
`false_comfort` and `online_collapse`, and `Trend`/`TrendRule`, a signal judged against its own trend (also used by
`ema_runaway`).

A healthy run drifts, by an amount that depends on the setting, while a collapse makes a signal fall faster than it
was moving (`TrendBreak`) or leave the level where it last rested (`FallFromStable`, for a fall that is steady from
its first step). Both variance rules hold their warnings while the run is in its first descent (every healthy
run's early fall of the target's spread, `FirstDescent`) until the fall is deeper than healthy ones go.
`false_comfort` is a combination only a failure produced in the detection library: variance and rank collapsing at
once while predictions still match the targets. `rank_collapse` also has a floor that needs no history: the patch
tokens' rank below a small fraction of the features' width, for a collapse that continues a deep first descent at
its own pace, where every reference above is the descent itself. `online_collapse` reads the online encoder, where
a collapse starts: its spread on the fixed probe batch far below the target's, which follows only through the EMA.
"""

from __future__ import annotations

import math

from jepa_core.alerts.base import Alert, RuleBase, fmt, number
from jepa_core.alerts.clock import REFERENCE_CLOCK, RunClock
from jepa_core.alerts.detectors import FallFromStable, FallOverWindow, FirstDescent, RecentHigh, TrendBreak
from jepa_core.config.rules import RulesConfig
from jepa_core.method.schedules import LrSchedule

# Constants of the trend estimator, not thresholds: what one reading may add to the CUSUM (in noise scales, so one
# outlier never fires alone), the floor of the noise scale (a 1% move) and how slowly the noise scale learns once
# its first readings are averaged (a fast one grows with a collapse itself and hides it).
TREND_CLIP = 6.0
TREND_MIN_SCALE = 0.01
TREND_SCALE_ALPHA = 0.02
CONSTANT_FEATURES = 1e-6  # a spread at or below this is constant features, whatever the history (critical)


class Trend:
    """One signal judged against its own trend: a `TrendBreak` on the log of its readings after warm-up.

    Log values make the noise scale and the slope relative (a 10% fall is the same whatever the metric's units).
    `rising` watches for a climb instead of a fall.
    """

    def __init__(self, cfg: RulesConfig, clock: RunClock, threshold: float, rising: bool = False,
                 min_innovations: int = TrendBreak.min_innovations, min_span_steps: float = 0.0) -> None:
        self.rising = rising
        self.detector = TrendBreak(clock.readings(cfg.trend_level_readings), clock.readings(cfg.trend_slope_readings),
                                   cfg.trend_drift, threshold, clip=TREND_CLIP, min_scale=TREND_MIN_SCALE,
                                   scale_alpha=TREND_SCALE_ALPHA, min_innovations=min_innovations,
                                   min_span_steps=min_span_steps)

    def update(self, step: int, value: float) -> bool:
        x = math.log(max(value, 1e-30))
        return self.detector.update(step, -x if self.rising else x)

    @property
    def level(self) -> float | None:
        """The trend's current level, in the metric's units."""
        level = self.detector.level
        return None if level is None else math.exp(-level if self.rising else level)


class FirstDescentGate:
    """Holds a fall warning while the target's spread on the fixed probe batch is in its first descent (begun, not
    yet recovered) and less than `rules.first_descent_fall` below its peak. Healthy runs fall up to ~30% there while
    their features reorganise, and recover; a collapse that starts inside the descent goes on past that depth, and a
    collapse that keeps a shallow descent from ending is left to the late-fall reference of `steady_collapse`, which
    the hold does not delay once the per-batch spread also breaks its trend. Before the descent begins, after it
    ends, and without the metric in the stream, the gate is open."""

    metric = "target/fixed_batch_std_mean"

    def __init__(self, cfg: RulesConfig) -> None:
        self.fall = cfg.first_descent_fall
        self.descent = FirstDescent(cfg.rest_change)

    def observe(self, row: dict) -> bool:
        """Learn from a row; True at the reading that ends the first descent: a fall held until then is over, and
        the rule forgets it (or it would fire on the way back up)."""
        value = number(row, self.metric)
        if value is None or not math.isfinite(value) or value <= 0:
            return False
        ended = self.descent.update(value)
        return ended and self.fall > 0  # with the hold off (0) nothing was held, and nothing is forgotten

    @property
    def open(self) -> bool:
        return not self.descent.begun or self.descent.over or self.descent.depth >= self.fall


class TrendRule(RuleBase):
    """Signals each judged against their own trend. `breaking` holds the metrics whose fall is, at the latest
    reading, faster than their trend and noise allow (false_comfort reads it). A subclass names itself and defines
    `message(metric, value, step, trend, severity)`: what the alert says to check."""

    def __init__(self, cfg: RulesConfig, clock: RunClock, thresholds: dict[str, float],
                 innovations: dict[str, int] | None = None, spans: dict[str, float] | None = None) -> None:
        super().__init__(cfg, clock)
        fewer = innovations or {}  # metrics whose trend may judge after fewer innovations than the default
        span = spans or {}
        self.trends = {metric: Trend(cfg, clock, threshold, min_innovations=fewer.get(metric, TrendBreak.min_innovations),
                                     min_span_steps=span.get(metric, 0.0))
                       for metric, threshold in thresholds.items()}
        self.watches = frozenset(thresholds)
        self.breaking: set[str] = set()

    def judge(self, trend: Trend, step: int, value: float) -> tuple[bool, str]:
        """(in the condition, severity) for one reading."""
        return trend.update(step, value), "warning"

    def alerts_now(self, severity: str) -> bool:
        """Whether a reading in the condition may alert now (a subclass holds some back); `breaking` is kept
        either way."""
        return True

    def update(self, row: dict) -> list[Alert]:
        step, alerts = row["step"], []
        for metric, trend in self.trends.items():
            value = self._settled_reading(row, metric)
            if value is None:
                continue
            breaking, severity = self.judge(trend, step, value)
            self.breaking.discard(metric)
            if breaking:
                self.breaking.add(metric)
            if self.gate.observe(metric, breaking and self.alerts_now(severity), 1):
                alerts.append(self._alert(step, severity, metric, value,
                                          self.message(metric, value, step, trend, severity)))
        return alerts


class VarianceCollapseRule(TrendRule):
    name = "variance_collapse"

    def __init__(self, cfg: RulesConfig, clock: RunClock = REFERENCE_CLOCK) -> None:
        # The fixed-batch std is the target's spread on the same probe images every time: no sampling noise, so a
        # slow collapse late in a run stands out of its trend long before the per-batch std does.
        # The fixed batch has no sampling noise, so its trend may judge after fewer innovations: at a parameter-
        # distance cadence of 100 steps the fourth reading after warm-up, where the others start, is step 400.
        super().__init__(cfg, clock, {"target/std_mean": cfg.trend_break, "target/std_l2n": cfg.trend_break,
                                      "target/fixed_batch_std_mean": cfg.fixed_batch_break},
                         # judged once its readings span two slope memories: a few readings of a descent are no pace
                         spans={"target/fixed_batch_std_mean": clock.readings(2 * cfg.trend_slope_readings)})
        self.first_descent = FirstDescentGate(cfg)  # reads the fixed-batch std, already among the watched metrics

    def update(self, row: dict) -> list[Alert]:
        if self.first_descent.observe(row):
            for trend in self.trends.values():
                trend.detector.clear()
        return super().update(row)

    def alerts_now(self, severity: str) -> bool:
        return severity == "critical" or self.first_descent.open

    def judge(self, trend: Trend, step: int, value: float) -> tuple[bool, str]:
        if value <= CONSTANT_FEATURES:
            return True, "critical"
        return super().judge(trend, step, value)

    def message(self, metric: str, value: float, step: int, trend: Trend, severity: str) -> str:
        how = ("the target features are constant" if severity == "critical" else
               f"falling faster than its own trend and noise allow (trend level {fmt(trend.level or 0)})")
        return (f"variance collapse: {metric} = {fmt(value)} at step {step}, {how}; the target features are "
                "converging to a constant while the loss can still look fine. Check first the EMA momentum "
                "(ema.start close to 1, not 0), that the target encoder is not the online encoder, any extra "
                "loss term, the predictor depth and the learning rate; compare target/effective_rank.")


class SteadyCollapseRule(RuleBase):
    """The target's spread fallen well below a level it held: a collapse that sets in slowly and steadily, which a
    trend learns as a new pace. Three references, each judged on its own, for both spreads (the one on the fixed
    probe batch, without sampling noise, and the per-batch one, read every few steps at any cadence):

    - where the spread last rested (`FallFromStable`: it moved at most `rest_change` over `steady_window_readings`);
    - where the per-batch spread was `steady_late_window_readings` earlier (`FallOverWindow`), once the run is
      `steady_late_after_fraction` through: a collapse that continues the early descent never rests, and after the
      early part of a run no healthy spread falls that fast;
    - where either spread was `steady_window_readings` earlier, at any time: a fall steeper than any healthy run's,
      its first descent's included, so never held.

    The first two are held while the first descent lasts, except on the per-batch spread when it also breaks its
    own trend at the same reading (`variance_collapse`'s verdict, `rules.steady_trend_confirms`): healthy descents
    fall far from where they rested, or fast against their trend, but in the library never both at once.
    """

    name = "steady_collapse"
    fixed_metric = "target/fixed_batch_std_mean"
    batch_metric = "target/std_mean"

    def __init__(self, cfg: RulesConfig, variance: VarianceCollapseRule | None = None,
                 clock: RunClock = REFERENCE_CLOCK) -> None:
        super().__init__(cfg, clock)
        self.window = clock.readings(cfg.steady_window_readings)
        self.late_after = clock.of_run(cfg.steady_late_after_fraction)
        # Its verdicts on this row (it runs first) confirm a per-batch fall inside the first descent.
        self.variance = variance if cfg.steady_trend_confirms else None
        self.metrics = (self.fixed_metric, self.batch_metric)
        self.tracks = {metric: self._track() for metric in self.metrics}
        self.late = (FallOverWindow(clock.readings(cfg.steady_late_window_readings), cfg.steady_late_fall)
                     if cfg.steady_late_fall > 0 else None)
        self.steep = ({metric: FallOverWindow(self.window, cfg.steady_steep_fall) for metric in self.metrics}
                      if cfg.steady_steep_fall > 0 else {})
        self.watches = frozenset(self.metrics)
        self.first_descent = FirstDescentGate(cfg)

    def _track(self) -> FallFromStable:
        return FallFromStable(self.window, self.cfg.rest_change, self.cfg.steady_fall)

    def update(self, row: dict) -> list[Alert]:
        step, alerts = row["step"], []
        if self.first_descent.observe(row):
            # The levels it rested at before the descent are no reference now. The fixed batch's level at the
            # recovery is, at once: a collapse that sets in right after the recovery falls from it before the
            # signal could rest. The per-batch spread, noisier, waits to rest again.
            self.tracks = {metric: self._track() for metric in self.metrics}
            value = self._settled_reading(row, self.fixed_metric)
            if value is not None and value > 0:
                self.tracks[self.fixed_metric].reference, self.tracks[self.fixed_metric].reference_step = value, step
        held = not self.first_descent.open  # the same for every metric of this row
        also = (", and faster than its own trend and noise allow: inside its first descent a healthy spread does "
                "one or the other, not both") if held else ""
        for metric in self.metrics:
            value = self._settled_reading(row, metric)
            if value is None or value <= 0:
                continue
            how: str | None = None  # what the spread fell against, for the message
            confirmed = (self.variance is not None and metric == self.batch_metric
                         and metric in self.variance.breaking)
            passes = not held or confirmed
            track = self.tracks[metric]
            if track.update(step, value) and passes:
                how = f"{self._below(value, track.reference, track.reference_step)}, and falling ever since{also}"
            if metric == self.batch_metric and self.late is not None:
                late = self.late.update(step, value) and step >= self.late_after
                if late and how is None and passes:
                    how = (f"{self._below(value, self.late.reference, self.late.reference_step)}, "
                           f"{step - (self.late.reference_step or step)} steps earlier: past the first "
                           f"{self.late_after:g} steps no healthy run's spread falls that fast{also}")
            # Nor to a fall steeper than any healthy run's, its first descent's included.
            steep = self.steep.get(metric)
            if steep is not None and steep.update(step, value) and how is None:
                how = (f"{self._below(value, steep.reference, steep.reference_step)}, "
                       f"{step - (steep.reference_step or step)} steps earlier: faster than any healthy run's spread "
                       "fell in the detection library, its first descent included")
            # The per-batch spread is sampled: one low batch is not a fall, confirm_readings in a row are.
            patience = self.cfg.confirm_readings if metric == self.batch_metric else 1
            if self.gate.observe(metric, how is not None, patience):
                alerts.append(self._alert(step, "warning", metric, value, (
                    f"steady collapse: {metric} = {fmt(value)} at step {step}, {how}: the target features are "
                    "shrinking toward a constant while the loss looks fine. Check first any extra loss term, the "
                    "EMA momentum and the learning rate; watch target/effective_rank, which follows.")))
        return alerts

    @staticmethod
    def _below(value: float, reference: float | None, reference_step: int | None) -> str:
        reference = reference or value
        return f"{fmt(100 * (1 - value / reference))}% below {fmt(reference)}, its level at step {reference_step}"


class RankCollapseRule(TrendRule):
    """Both ranks against their own trends, and the patch tokens' rank against the features' width: a floor that
    needs no history, for a collapse that continues a run's own first descent at its own pace (no trend breaks, and
    no level rested before it). It reads `feature_dim`, the width of the target's features (model.embed_dim), which
    the stream does not carry: without it (None) only the trends judge."""

    name = "rank_collapse"
    token_metric = "target/token_effective_rank"

    def __init__(self, cfg: RulesConfig, feature_dim: int | None = None, clock: RunClock = REFERENCE_CLOCK) -> None:
        super().__init__(cfg, clock, {self.token_metric: cfg.trend_break, "target/effective_rank": cfg.pooled_rank_break})
        self.feature_dim = feature_dim if feature_dim is not None and feature_dim > 0 else None
        self.floor = (cfg.rank_floor_fraction * self.feature_dim
                      if self.feature_dim is not None and cfg.rank_floor_fraction > 0 else None)

    def update(self, row: dict) -> list[Alert]:
        alerts = super().update(row)
        value = self._settled_reading(row, self.token_metric) if self.floor is not None else None
        if value is None or self.floor is None:
            return alerts
        below = value < self.floor
        # Its own episode (the trend's gate key is the metric itself); a trend alert on this row already says it.
        if self.gate.observe(f"{self.token_metric} floor", below, 1) and not alerts:
            alerts.append(self._alert(row["step"], "warning", self.token_metric, value, (
                f"rank collapse: {self.token_metric} = {fmt(value)} at step {row['step']}, below "
                f"{fmt(self.floor)} ({fmt(100 * self.cfg.rank_floor_fraction)}% of the features' "
                f"{self.feature_dim} dimensions): the patch features span only a few "
                "directions. Check first any extra loss term, the EMA momentum and the learning rate; compare "
                "target/std_mean, which shrinks with it.")))
        return alerts

    def message(self, metric: str, value: float, step: int, trend: Trend, severity: str) -> str:
        return (f"rank collapse: {metric} = {fmt(value)} at step {step}, falling faster than its own trend "
                f"and noise allow (trend level {fmt(trend.level or 0)}); the representation is losing "
                "dimensions. Check first the EMA momentum (target copying the online encoder collapses within "
                "~100 steps), the learning rate (a blow-up collapses rank while std rises), and the masks; "
                "watch target/std_l2n and the loss for the crash that follows.")


class FalseComfortRule(RuleBase):
    """Variance and rank both collapsing at once while predictions still match the targets: a combination that a
    healthy run's slow drift does not produce."""

    name = "false_comfort"
    metric = "pred_target/cosine"

    def __init__(self, cfg: RulesConfig, variance: VarianceCollapseRule, rank: RankCollapseRule,
                 clock: RunClock = REFERENCE_CLOCK) -> None:
        super().__init__(cfg, clock)
        self.variance, self.rank = variance, rank
        self.escalated = False  # the critical alert of the current episode came
        self.watches = frozenset({self.metric, *variance.watches, *rank.watches})

    def update(self, row: dict) -> list[Alert]:
        step, cfg = row["step"], self.cfg
        cosine = self._settled_reading(row, self.metric)
        if cosine is None:
            return []
        both = bool(self.variance.breaking) and bool(self.rank.breaking)
        held = both and cosine >= cfg.false_comfort_cosine
        first = self.gate.observe(self.metric, held, 1)
        if first:
            self.escalated = False
        # Critical only once the combination has held `confirm_readings` readings in a row: one reading of it also
        # comes where an lr blow-up bends the representation without harming it.
        streak = self.gate.streaks.get(self.metric, 0)
        if held and not self.escalated and (first or not self.gate.armed) \
                and streak >= cfg.confirm_readings:
            self.escalated = True
            return [self._comfort_alert(step, "critical", cosine, streak)]
        if first:
            return [self._comfort_alert(step, "warning", cosine, streak)]
        return []

    def _comfort_alert(self, step: int, severity: str, cosine: float, streak: int) -> Alert:
        held = f" for {streak} readings in a row" if streak > 1 else ""
        return self._alert(step, severity, self.metric, cosine, (
            f"false comfort: predictions match targets (cosine {fmt(cosine)}) while both the target variance "
            f"({', '.join(sorted(self.variance.breaking))}) and its rank ({', '.join(sorted(self.rank.breaking))}) "
            f"collapse at step {step}{held}; a constant target is trivially predictable. Check first the EMA "
            "momentum, any extra loss term and the learning rate; do not trust the loss."))


class OnlineCollapseRule(RuleBase):
    """The online encoder's spread on the fixed probe batch fallen, within a few readings, to a small fraction of its
    target's: a collapse seen where it starts. The gradient moves the online (context) encoder; the target follows
    only through the EMA, a few hundred steps behind, so a collapse takes the online spread down at once while the
    target's, which the other variance rules read, may still look like a healthy first descent. A healthy online
    encoder also dips below its target early in a run (to a tenth of it at worst in the detection library), but over
    several readings; a collapse drops the ratio several-fold between two. Streams recorded before the metric existed
    have no reading: silent there. Right after a steep lr warm-up a healthy online encoder can drop its spread as fast
    as a collapse does, so the rule judges only from `online_lead_after_warmups` warm-ups into the run, where the
    run's lr warm-up (optim.warmup_steps) is known."""

    name = "online_collapse"
    online = "online/fixed_batch_std_mean"
    target = "target/fixed_batch_std_mean"

    def __init__(self, cfg: RulesConfig, lr_schedule: LrSchedule | None = None,
                 clock: RunClock = REFERENCE_CLOCK) -> None:
        super().__init__(cfg, clock)
        self.watches = frozenset({self.online, self.target})
        self.window = clock.readings(cfg.recent_high_readings)
        self.high = RecentHigh(self.window)  # of the settled online/target ratios
        # Readings before this still count as the recent high a fall is measured from.
        self.judged_from = cfg.online_lead_after_warmups * (lr_schedule.warmup_steps if lr_schedule else 0)

    def update(self, row: dict) -> list[Alert]:
        cfg, step = self.cfg, row["step"]
        online, target = self._settled_reading(row, self.online), self._settled_reading(row, self.target)
        if cfg.online_lead_floor <= 0 or online is None or target is None or target <= 0:
            return []
        ratio = online / target
        before = self.high.update(step, ratio)
        fell = (before is not None and step >= self.judged_from and ratio < cfg.online_lead_floor
                and before >= cfg.online_lead_fall * max(ratio, 1e-12))
        if self.gate.observe(self.online, fell, 1):
            return [self._alert(step, "warning", self.online, online, (
                f"online collapse: {self.online} = {fmt(online)} at step {step}, {fmt(ratio)} of the target's "
                f"{fmt(target)}, down from {fmt(before or 0)} of it within {self.window:g} steps: the "
                "online encoder's features are shrinking toward a constant, and the target, which follows it "
                "through the EMA, will follow. Check first any extra loss term, the learning rate and the EMA "
                "momentum; watch target/fixed_batch_std_mean and target/effective_rank."))]
        return []
