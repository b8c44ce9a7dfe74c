"""The rules of design §7, one class each, and `build_rules` that configures a fresh set for one stream.

Two kinds. Invariant rules fire at once on a logged fact that is exact on every healthy run: a target patch in the
context, a target parameter that trains, a non-finite loss, a target equal to the online encoder or never updated.
Trend rules judge a signal against its own recent level, slope and noise (`detectors.TrendBreak`), never against a
fixed fraction of its peak: a healthy run drifts, by an amount that depends on the setting, while a failure makes a
signal fall (or climb) faster than it was moving. One level is absolute, set by the model and not the run: the
patch tokens' rank against the features' width (`rank_collapse`'s floor, when the engine is given the width). The
representation-collapse rules live in `jepa_core.alerts.collapse`, the predictor's in `jepa_core.alerts.predictor`;
this module holds the invariants, the EMA and divergence rules, and the set.

The alert type and the rule plumbing live in `jepa_core.alerts.base`, the thresholds in `jepa_core.config.rules`,
the statistics in `jepa_core.alerts.detectors`; `jepa_core.alerts.engine` runs them over a stream. Each rule names its
metrics next to the thresholds they go with; `jepa_core.metrics.registry` records them (`read_by`), and
tests/test_registry.py keeps every rule's `watches` equal to that record.
"""

from __future__ import annotations

import math

from jepa_core.alerts.base import Alert, Rule, RuleBase, fmt, number
from jepa_core.alerts.clock import REFERENCE_CLOCK, RunClock
from jepa_core.alerts.collapse import (FalseComfortRule, OnlineCollapseRule, RankCollapseRule, SteadyCollapseRule,
                                       Trend, VarianceCollapseRule)
from jepa_core.alerts.evaluation import EvalRegressionRule
from jepa_core.alerts.predictor import PredictorCollapseRule
from jepa_core.alerts.detectors import EpisodeGate, OneSidedCusum, RecentHigh, RobustBaseline
from jepa_core.config.rules import RulesConfig, split_names
from jepa_core.method.schedules import LrSchedule

# Levels exact by definition, not thresholds: a healthy run logs 0 for a leak and for target gradients, never a
# target-online distance of exactly 0 after step 0, and never a target statistic unchanged to the last bit while
# the online encoder moves. A momentum below a half copies most of the online encoder at every update (healthy
# targets run at 0.98-1.0); a target-online weight distance beyond the weights' own norm has left them behind.
COPY_MOMENTUM = 0.5
RUNAWAY_DISTANCE = 1.0
# Constants of the divergence rule's robust running level (RobustBaseline, OneSidedCusum), not thresholds: the
# level's and the noise scale's per-reading rates, the noise floor of log grad_norm (a 10% move is one scale) and of
# the loss (2% of its level), the CUSUM's allowance and clip per reading, and the level above which the baseline
# learns four times slower (it must not absorb the shift it is testing).
BASELINE_ALPHA = 0.2
SCALE_ALPHA = 0.05
MIN_LOG_SCALE = 0.1
LOSS_MIN_REL_SCALE = 0.02
SHIFT_DRIFT = 1.0
SHIFT_CLIP = 5.0
SUSPECT_LEVEL = 8.0
LEVEL_READINGS = 3  # readings a running level needs before anything is judged against it


class ImmediateThresholdRule(RuleBase):
    """Critical at the first reading above a limit that is 0 on every healthy run (mask leak, target gradients)."""

    def __init__(self, cfg: RulesConfig, name: str, metric: str, limit: float, message: str) -> None:
        super().__init__(cfg)
        self.name, self.metric, self.limit, self.message = name, metric, limit, message
        self.watches = frozenset({metric})

    def update(self, row: dict) -> list[Alert]:
        value = number(row, self.metric)
        if value is None:
            return []
        condition = not math.isfinite(value) or value > self.limit
        if self.gate.observe(self.metric, condition, 1):
            text = self.message.format(value=fmt(value), step=row["step"])
            return [self._alert(row["step"], "critical", self.metric, value, text)]
        return []


class NonFiniteRule(RuleBase):
    name = "non_finite"

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__(cfg)
        self.metrics = split_names(cfg.non_finite_metrics)
        self.watches = frozenset(self.metrics)

    def update(self, row: dict) -> list[Alert]:
        alerts = []
        for metric in self.metrics:
            value = number(row, metric)
            if value is None:
                continue
            if self.gate.observe(metric, not math.isfinite(value), 1):
                alerts.append(self._alert(row["step"], "critical", metric, value, (
                    f"{metric} is {value} at step {row['step']}: training has diverged numerically. Check first the "
                    "learning rate and its warm-up (lower it), mixed precision (bf16/fp16 overflow: try fp32), "
                    "gradient clipping, and NaN/Inf in the input batch; resume from the last finite checkpoint.")))
        return alerts


class EmaStalledRule(RuleBase):
    """Target equal to the online encoder (a distance of exactly 0, in weights or in features on the fixed probe
    batch, or an EMA momentum that copies most of the online weights every step) or target never updated (its
    fixed-batch statistics frozen while the online encoder moves).

    The momentum is logged with every basic reading, far more often than either distance: a schedule or config that
    sets it to 0 shows at the first reading, where the distances' first reading after it may come only with the
    harm. A target that aliases the online module logs a normal momentum; only the distances show that."""

    name = "ema_stalled"
    momentum = "ema_tau"
    distance = "ema/relative_param_l2"
    feature_distance = "ema/fixed_batch_distance"  # read with the fixed batch, far more often than the weights'
    online_moves = ("ema/param_l2", feature_distance)  # either changing between readings: the online encoder trains

    def __init__(self, cfg: RulesConfig, clock: RunClock = REFERENCE_CLOCK) -> None:
        super().__init__(cfg, clock)
        self.frozen_metrics = split_names(cfg.ema_frozen_metrics)
        self.watches = frozenset({self.momentum, self.distance, *self.online_moves, *self.frozen_metrics})
        self.last_stats: dict[str, float] = {}
        self.last_online: dict[str, float] = {}
        self.online_moved = False  # the online encoder moved since the target statistics last changed
        # The momentum's warning has episodes of its own, so that it never holds the distances' critical alert.
        self.momentum_gate = EpisodeGate(rearm=cfg.rearm_readings)

    def update(self, row: dict) -> list[Alert]:
        step, cfg, alerts = row["step"], self.cfg, []
        momentum = number(row, self.momentum)
        # From step 1: at step 0 the target copies the online encoder by construction.
        if momentum is not None and math.isfinite(momentum) and step >= 1:
            if self.momentum_gate.observe(self.momentum, momentum < COPY_MOMENTUM, 1):
                # A warning: what the momentum does is shown by the distances (critical at 0) and the collapse
                # rules; a copied target labelled benign by harm (batch32, sparse: no distance reading or collapse
                # within the steps the library trains past the onset) would otherwise count a critical false alarm.
                alerts.append(self._alert(step, "warning", self.momentum, momentum, (
                    f"target encoder follows the online encoder almost at once: the EMA momentum {self.momentum} = "
                    f"{fmt(momentum)} at step {step} (a slow target needs 0.99-1.0), so the target is mostly a copy "
                    "of the online encoder after every update, which collapses the representation. Check first the "
                    "EMA schedule (ema.start/ema.end, and a schedule that runs past its steps) and that the update "
                    "is target = m*target + (1-m)*online, not with m and 1-m swapped.")))
        for metric in (self.distance, self.feature_distance):
            distance = number(row, metric)
            if distance is None or not math.isfinite(distance) or step < 1:
                continue
            if self.gate.observe(metric, distance <= 0.0, 1):  # exactly 0 after step 0 is conclusive at once
                alerts.append(self._alert(step, "critical", metric, distance, (
                    f"target encoder equals the online encoder ({metric} = {fmt(distance)} at step {step}): "
                    "the EMA momentum is effectively 0, which collapses the representation. Check first the EMA "
                    "schedule (ema.start/ema.end near 0.996-1.0), that the update is target = m*target + (1-m)*online "
                    "and not a load_state_dict copy, and that the two encoders do not share parameters.")))
        for metric in self.online_moves:
            value = number(row, metric)
            if value is None or not math.isfinite(value):
                continue
            if metric in self.last_online and value != self.last_online[metric]:
                self.online_moved = True
            self.last_online[metric] = value
        present = {m: v for m in self.frozen_metrics if (v := number(row, m)) is not None and math.isfinite(v)}
        if not present or step < self.settle_step:
            return alerts
        compared = [m for m in present if m in self.last_stats]
        unchanged = bool(compared) and all(present[m] == self.last_stats[m] for m in compared)
        self.last_stats.update(present)
        if not unchanged:
            self.online_moved = False
        metric = next(iter(present))
        if self.gate.observe("target/frozen", unchanged and self.online_moved, cfg.confirm_readings):
            alerts.append(self._alert(step, "critical", metric, present[metric], (
                f"target encoder is never updated: {', '.join(compared)} exactly unchanged at step {step} while "
                "the online encoder keeps moving. Check first that the EMA update runs after every optimizer step "
                "(and is not skipped under gradient accumulation or a rank check), that it updates the same "
                "module the target forward uses, and that ema_tau is below 1.")))
        return alerts


class EmaRunawayRule(RuleBase):
    """The online encoder moving away from the target faster than the EMA can follow: the weights' distance climbing
    faster than its own trend or past the weights' own norm, or either distance (weights, or features on the fixed
    probe batch) jumping in one reading.

    The jump is what a late learning-rate blow-up shows first when it scrambles the representation rather than
    collapsing it: the feature distance several times its previous reading, while spreads and ranks rise. The trend
    adds a capped amount per reading, so at a slow cadence one reading, however far it jumps, cannot fire it. Healthy
    runs of the detection library jump at most about 2x in one reading, early in the lr warm-up, where the schedule
    alone moves the features farther at each reading; so with the run's lr schedule known, the feature distance's jump
    is what remains once the schedule's own growth between the two readings (the area under it) is divided out."""

    name = "ema_runaway"
    metric = "ema/relative_param_l2"
    feature_distance = "ema/fixed_batch_distance"
    watches = frozenset({metric, feature_distance})

    def __init__(self, cfg: RulesConfig, lr_schedule: LrSchedule | None = None,
                 clock: RunClock = REFERENCE_CLOCK) -> None:
        super().__init__(cfg, clock)
        self.trend = Trend(cfg, clock, cfg.trend_break, rising=True)
        self.jump_ratio = cfg.ema_runaway_jump_ratio
        # The feature distance's jump is judged against what the run's lr schedule alone explains (the lr summed up
        # to each reading); without the schedule (a stream without its config), against the reading itself.
        self.lr_schedule = lr_schedule
        self.previous: dict[str, tuple[int, float]] = {}  # each distance's last finite, positive reading and its step
        # The feature distance is read far more often than the weights': its own episodes, so that its readings
        # neither re-arm nor hold the weights' alert.
        self.feature_gate = EpisodeGate(rearm=cfg.rearm_readings)

    def _jumped(self, row: dict, metric: str) -> tuple[float, str] | None:
        """(reading, how far it jumped, in words) when `metric` jumped by its ratio or more at this row."""
        value = number(row, metric)
        if value is None or not math.isfinite(value) or value <= 0:  # exactly 0 is ema_stalled's
            return None
        step = row["step"]
        last, self.previous[metric] = self.previous.get(metric), (step, value)
        ratio = self.jump_ratio
        if last is None or ratio <= 0 or step < self.settle_step:
            return None
        growth = self._schedule_growth(metric, last[0], step)
        jump = value / last[1] / growth
        if jump < ratio:
            return None
        how = f"{value / last[1]:.1f}x its previous reading"
        return value, how + (f", {jump:.1f}x what the lr schedule alone explains" if growth > 1 else "")

    def _schedule_growth(self, metric: str, before: int, step: int) -> float:
        """How many times farther the schedule alone carries the online encoder by `step` than by `before`: the
        ratio of the lr summed up to each (1 for the weights' distance, or without a schedule)."""
        if metric != self.feature_distance or self.lr_schedule is None:
            return 1.0
        then, now = self.lr_schedule.summed(before), self.lr_schedule.summed(step)
        return now / then if then > 0 and now > then else 1.0

    def update(self, row: dict) -> list[Alert]:
        step, alerts = row["step"], []
        jumps = {m: j for m in (self.metric, self.feature_distance) if (j := self._jumped(row, m)) is not None}
        value = self._settled_reading(row, self.metric)
        if value is not None and value > 0:
            climbing = self.trend.update(step, value)
            out_of_bounds = value > RUNAWAY_DISTANCE
            if self.gate.observe(self.metric, climbing or out_of_bounds or self.metric in jumps, 1):
                how = ("farther than the weights norm" if out_of_bounds else
                       jumps[self.metric][1] if self.metric in jumps else "climbing faster than its own trend")
                alerts.append(self._runaway(step, self.metric, value, how))
        if step >= self.settle_step and number(row, self.feature_distance) is not None:
            jumped = jumps.get(self.feature_distance)
            if self.feature_gate.observe(self.feature_distance, jumped is not None, 1):  # True only on a jump
                reading, how = jumped
                alerts.append(self._runaway(step, self.feature_distance, reading, how))
        return alerts

    def _runaway(self, step: int, metric: str, value: float, how: str) -> Alert:
        return self._alert(step, "warning", metric, value, (
            f"the online encoder is running away from the target ({metric} = {fmt(value)} at step {step}, {how}). "
            "Check first the learning rate (a blow-up moves the online weights faster than the EMA can follow; see "
            "grad_norm and loss), then the EMA momentum schedule."))


class _LevelShift:
    """A sustained climb of a signal's log level above its robust running baseline (one-sided CUSUM on z-scores):
    a step change, such as a learning rate multiplied, or a steady climb; one spike cannot fire it."""

    def __init__(self, cfg: RulesConfig, threshold: float) -> None:
        self.cfg = cfg
        self.baseline = RobustBaseline(BASELINE_ALPHA, min_scale=MIN_LOG_SCALE, scale_alpha=SCALE_ALPHA)
        self.cusum = OneSidedCusum(SHIFT_DRIFT, threshold, SHIFT_CLIP)

    def update(self, value: float) -> bool:
        x = math.log(max(value, 1e-30))
        climbing = self.cusum.update(self.baseline.z(x)) if self.baseline.count >= LEVEL_READINGS else False
        self.baseline.update(x, suspect=self.cusum.total > SUSPECT_LEVEL)
        return climbing

    @property
    def baseline_value(self) -> float:
        return math.exp(self.baseline.center or 0.0)


class DivergenceRule(RuleBase):
    name = "divergence"
    spread = "target/std_mean"
    agreement = "pred_target/cosine"
    watches = frozenset({"grad_norm", "loss", "health/update_ratio", spread, agreement})

    def __init__(self, cfg: RulesConfig, clock: RunClock = REFERENCE_CLOCK) -> None:
        super().__init__(cfg, clock)
        self.judged_from = clock.of_run(cfg.divergence_settle_fraction)
        self.agreement_window = clock.readings(cfg.recent_high_readings)
        self.shifts = {"grad_norm": _LevelShift(cfg, cfg.divergence_shift_break),
                       "health/update_ratio": _LevelShift(cfg, cfg.divergence_shift_break)}
        self.loss_baseline = RobustBaseline(BASELINE_ALPHA, scale_alpha=SCALE_ALPHA)
        # A learning rate too high pushes the weights, and with them the target's features, apart: the per-batch
        # spread climbs faster than its own trend. Read every few steps at any cadence, unlike the update ratio
        # and the parameter distance (every 500 steps at the defaults).
        self.spread_trend = Trend(cfg, clock, cfg.trend_break, rising=True)
        # The prediction's agreement with the target falling fast: scale-free where the loss is not (a loss that
        # triples from 0.1 is within the noise a steep early descent taught the loss baseline).
        self.agreement_high = RecentHigh(self.agreement_window)

    def update(self, row: dict) -> list[Alert]:
        step, cfg, alerts = row["step"], self.cfg, []
        if step < self.judged_from:
            return []
        for metric, shift in self.shifts.items():
            value = number(row, metric)
            if value is None or not math.isfinite(value):
                continue
            # One reading far above the running level: on the detection library's healthy runs the largest was
            # 4.3x; a collapse term or a target swap shows at once as a 7-15x jump in the gradient.
            spike = (metric == "grad_norm" and shift.baseline.count >= LEVEL_READINGS
                     and value > cfg.divergence_spike * shift.baseline_value)
            climbing = shift.update(value)
            if self.gate.observe(metric, climbing or spike, 1):
                what = ("the optimizer's steps grew relative to the weights" if metric == "health/update_ratio"
                        else f"a spike of {fmt(value / shift.baseline_value)}x" if spike and not climbing
                        else "a sustained shift rather than a spike")
                alerts.append(self._alert(step, "warning", metric, value, (
                    f"divergence: {metric} has been climbing (now {fmt(value)}, baseline ~{fmt(shift.baseline_value)}"
                    f") up to step {step}: {what}. Check first the learning rate and its schedule (lower it or "
                    "lengthen warm-up), gradient clipping, and weight decay; watch the loss for a spike next.")))
        spread = self._settled_reading(row, self.spread)
        if spread is not None and spread > 0 and cfg.trend_break > 0:
            climbing = self.spread_trend.update(step, spread)
            if self.gate.observe(self.spread, climbing, 1):
                alerts.append(self._alert(step, "warning", self.spread, spread, (
                    f"divergence: {self.spread} = {fmt(spread)} at step {step} is climbing faster than its own "
                    f"trend and noise allow (trend level {fmt(self.spread_trend.level or 0)}): the weights are being "
                    "pushed apart. Check first the learning rate and its schedule, gradient clipping and weight "
                    "decay; watch the loss and pred_target/cosine, which worsen with it.")))
        alerts += self._agreement_fell(row)
        loss = number(row, "loss")
        if loss is not None and math.isfinite(loss):
            center = self.loss_baseline.center
            self.loss_baseline.min_scale = max(1e-12, LOSS_MIN_REL_SCALE * abs(center or loss))
            z = self.loss_baseline.z(loss)
            spiking = self.loss_baseline.count >= LEVEL_READINGS and z > cfg.divergence_spike
            self.loss_baseline.update(loss)
            if self.gate.observe("loss", spiking, cfg.confirm_readings):
                alerts.append(self._alert(step, "warning", "loss", loss, (
                    f"divergence: loss jumped to {fmt(loss)} at step {step}, {fmt(z)} scales above its running "
                    f"level {fmt(center or 0.0)}. Check first the learning rate schedule (a blow-up), gradient "
                    "clipping, bad batches, and mixed-precision overflow; grad_norm usually moves with it.")))
        return alerts


    def _agreement_fell(self, row: dict) -> list[Alert]:
        cfg, step = self.cfg, row["step"]
        cosine = self._settled_reading(row, self.agreement)
        if cosine is None or cfg.divergence_agreement_fall <= 0:
            return []
        high = self.agreement_high.update(step, cosine)
        fell = high is not None and high > 0 and cosine <= (1 - cfg.divergence_agreement_fall) * high
        if not self.gate.observe(self.agreement, fell, 1):
            return []
        return [self._alert(step, "warning", self.agreement, cosine, (
            f"divergence: {self.agreement} = {fmt(cosine)} at step {step}, {100 * (1 - cosine / high):.0f}% below "
            f"its {fmt(high)} of the last {self.agreement_window:g} steps: the predictor has lost the target, which is moving faster "
            "than it can follow. Check first the learning rate and its schedule (a blow-up), then the EMA momentum; "
            "watch loss and target/std_mean, which move with it."))]


def build_rules(cfg: RulesConfig, feature_dim: int | None = None, lr_schedule: LrSchedule | None = None,
                eval_count: int | None = None, clock: RunClock = REFERENCE_CLOCK) -> list[Rule]:
    """One instance of every §7 rule, configured by `cfg` (fresh state: use one set per stream). `feature_dim` is the
    width of the target's features (model.embed_dim), which rank_collapse's floor needs (None: the floor is off);
    `lr_schedule` the run's lr schedule (its [optim] section): online_collapse waits out its warm-up and ema_runaway
    judges the feature distance's jumps against it (None: neither does); `eval_count` the images in the probe-val
    half (eval_regression's binomial noise on streams that did not measure it; None: such streams are not judged);
    `clock` the run's units of time (jepa_core.alerts.clock)."""
    variance, rank = VarianceCollapseRule(cfg, clock), RankCollapseRule(cfg, feature_dim, clock)
    return [
        ImmediateThresholdRule(cfg, "mask_leak", "mask/overlap_fraction", 0.0, (
            "mask leak: {value} of target patches also appear in the context at step {step}; the predictor can copy "
            "its answers. Check first the mask collator (context indices must exclude every target block) and "
            "faults.mask_leak_fraction.")),
        ImmediateThresholdRule(cfg, "target_gradients", "ema/target_grad_params", 0.0, (
            "target encoder receives gradients ({value} parameters hold or require a grad at step {step}): check "
            "that the target forward runs under torch.no_grad() and that its parameters have requires_grad=False "
            "and are not in the optimizer.")),
        NonFiniteRule(cfg),
        variance,
        rank,
        SteadyCollapseRule(cfg, variance, clock),  # after variance_collapse, whose trend verdicts it reads
        OnlineCollapseRule(cfg, lr_schedule, clock),
        EmaStalledRule(cfg, clock),
        EmaRunawayRule(cfg, lr_schedule, clock),
        FalseComfortRule(cfg, variance, rank, clock),  # after the two it reads, so it sees this row's verdicts
        DivergenceRule(cfg, clock),
        PredictorCollapseRule(cfg, clock),
        *([EvalRegressionRule(cfg, eval_count)] if cfg.eval_regression_noise_multiple > 0 else []),
    ]
