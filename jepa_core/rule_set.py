"""The rules of SPEC §7, one class each, and `build_rules` that configures a fresh set for one stream.

The engine, the config and the alert type live in `jepa_core.rules`; the statistics the rules lean on (running
peaks, robust baselines, CUSUM, episode gates) in `jepa_core.detectors`.
"""

from __future__ import annotations

import math

from jepa_core.detectors import (
    EpisodeGate,
    OneSidedCusum,
    RobustBaseline,
    StepEwma,
)
from jepa_core.rules import Alert, Rule, RulesConfig, _fmt, _number, _RuleBase, _Smoothed, _split_names


class ImmediateThresholdRule(_RuleBase):
    """Critical at the first reading above a limit that is 0 on every healthy run (mask leak, target gradients)."""

    def __init__(self, cfg: RulesConfig, name: str, metric: str, limit: float, message: str) -> None:
        super().__init__(cfg)
        self.name, self.metric, self.limit, self.message = name, metric, limit, message
        self.watches = frozenset({metric})

    def update(self, row: dict) -> list[Alert]:
        value = _number(row, self.metric)
        if value is None:
            return []
        condition = not math.isfinite(value) or value > self.limit
        if self.gate.observe(self.metric, condition, 1):
            text = self.message.format(value=_fmt(value), step=row["step"])
            return [self._alert(row["step"], "critical", self.metric, value, text)]
        return []


class NonFiniteRule(_RuleBase):
    name = "non_finite"

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__(cfg)
        self.metrics = _split_names(cfg.non_finite_metrics)
        self.watches = frozenset(self.metrics)

    def update(self, row: dict) -> list[Alert]:
        alerts = []
        for metric in self.metrics:
            value = _number(row, metric)
            if value is None:
                continue
            if self.gate.observe(metric, not math.isfinite(value), 1):
                alerts.append(self._alert(row["step"], "critical", metric, value, (
                    f"{metric} is {value} at step {row['step']}: training has diverged numerically. Check first the "
                    "learning rate and its warm-up (lower it), mixed precision (bf16/fp16 overflow: try fp32), "
                    "gradient clipping, and NaN/Inf in the input batch; resume from the last finite checkpoint.")))
        return alerts


class VarianceCollapseRule(_RuleBase):
    name = "variance_collapse"
    metrics = ("target/std_mean", "target/std_l2n")
    watches = frozenset(metrics)

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__(cfg)
        self.tracks = {m: _Smoothed(cfg.smoothing_alpha) for m in self.metrics}
        self.references = {m: StepEwma(cfg.variance_rate_window_steps) for m in self.metrics}

    def update(self, row: dict) -> list[Alert]:
        step, cfg, alerts = row["step"], self.cfg, []
        for metric, track in self.tracks.items():
            value = _number(row, metric)
            if value is None or not math.isfinite(value) or step < cfg.warmup_steps:
                continue
            reference = self.references[metric].value  # about variance_rate_window_steps old, before this reading
            smoothed = track.update(value)
            self.references[metric].update(step, smoothed)
            ratio = track.fraction_of_peak()
            rate = smoothed / reference if reference else None
            falling = track.count >= cfg.min_readings and (
                (ratio is not None and ratio < cfg.variance_fraction_of_peak)
                or (rate is not None and rate < cfg.variance_rate_min_ratio))
            if self.gate.observe(metric, falling or value <= cfg.variance_abs_floor, cfg.variance_patience):
                alerts.append(self._alert(step, "critical", metric, value, (
                    f"representation collapse: {metric} = {_fmt(value)} at step {step}, "
                    f"{_fmt(100 * (ratio or 0.0))}% of its peak {_fmt(track.peak.value or 0.0)}"
                    + (f" and {_fmt(100 * rate)}% of its level ~{_fmt(cfg.variance_rate_window_steps)} steps ago"
                       if rate is not None else "") + "; the target features "
                    "are converging to a constant while the loss can still look fine. Check first the EMA momentum "
                    "(ema.start close to 1, not 0), that the target encoder is not the online encoder, the "
                    "predictor depth and the learning rate; compare target/effective_rank.")))
        return alerts


class DeadDimensionsRule(_RuleBase):
    name = "dead_dimensions"
    metric = "target/dead_dim_fraction"
    watches = frozenset({metric})

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__(cfg)
        self.track = _Smoothed(cfg.smoothing_alpha)

    def update(self, row: dict) -> list[Alert]:
        step, cfg = row["step"], self.cfg
        value = self._settled_reading(row, self.metric)
        if value is None:
            return []
        smoothed = self.track.update(value)
        low = self.track.low.value if self.track.low.value is not None else smoothed
        rising = smoothed - low >= cfg.dead_dim_rise or smoothed >= cfg.dead_dim_max_fraction
        if self.gate.observe(self.metric, self.track.count >= cfg.min_readings and rising, cfg.dead_dim_patience):
            return [self._alert(step, "warning", self.metric, value, (
                f"{_fmt(100 * value)}% of target feature dimensions are dead (no variance) at step {step}, up from "
                f"{_fmt(100 * low)}%. Check first weight decay (too large shrinks whole dimensions), the EMA momentum, "
                "and the learning rate; a falling target/effective_rank confirms a dimensional collapse."))]
        return []


class RankCollapseRule(_RuleBase):
    name = "rank_collapse"
    metrics = ("target/token_effective_rank", "target/effective_rank")
    watches = frozenset(metrics)

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__(cfg)
        self.tracks = {m: _Smoothed(cfg.smoothing_alpha) for m in self.metrics}
        self.references = {m: StepEwma(cfg.rank_rate_window_steps) for m in self.metrics}

    def _limits(self, metric: str) -> tuple[float, float]:
        """(fraction of peak, rate ratio) below which `metric` counts as collapsing."""
        cfg = self.cfg
        if metric == "target/effective_rank":
            return cfg.pooled_rank_fraction_of_peak, cfg.pooled_rank_rate_min_ratio
        return cfg.rank_fraction_of_peak, cfg.rank_rate_min_ratio

    def update(self, row: dict) -> list[Alert]:
        step, cfg, alerts = row["step"], self.cfg, []
        for metric, track in self.tracks.items():
            value = _number(row, metric)
            if value is None or not math.isfinite(value) or step < cfg.warmup_steps:
                continue
            fraction_limit, rate_limit = self._limits(metric)
            reference = self.references[metric].value  # about rank_rate_window_steps old, before this reading
            smoothed = track.update(value)
            self.references[metric].update(step, smoothed)
            of_peak = track.fraction_of_peak()
            below_peak = of_peak is not None and of_peak < fraction_limit
            rate = smoothed / reference if reference else None
            sharp = rate is not None and rate < rate_limit
            condition = track.count >= cfg.min_readings and (below_peak or sharp)
            if self.gate.observe(metric, condition, cfg.rank_patience):
                how = (f"below {_fmt(100 * fraction_limit)}% of its peak {_fmt(track.peak.value or 0)}"
                       if below_peak else f"falling fast ({_fmt(100 * (rate or 0))}% of its level "
                       f"~{_fmt(cfg.rank_rate_window_steps)} steps ago)")
                alerts.append(self._alert(step, "warning", metric, value, (
                    f"rank collapse: {metric} = {_fmt(value)} at step {step}, {how}; the representation is losing "
                    "dimensions. Check first the EMA momentum (target copying the online encoder collapses within "
                    "~100 steps), the learning rate (a blow-up collapses rank while std rises), and the masks; "
                    "watch target/std_l2n and the loss for the crash that follows.")))
        return alerts


class EmaStalledRule(_RuleBase):
    """Target equal to the online encoder (distance exactly 0) or target never updated (statistics frozen)."""

    name = "ema_stalled"
    distance = "ema/relative_param_l2"

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__(cfg)
        self.frozen_metrics = _split_names(cfg.ema_frozen_metrics)
        self.watches = frozenset({self.distance, "ema/param_l2", *self.frozen_metrics})
        self.last_stats: dict[str, float] = {}
        self.last_param_l2: float | None = None
        self.param_moved = False  # ema/param_l2 changed since the target statistics last changed

    def update(self, row: dict) -> list[Alert]:
        step, cfg, alerts = row["step"], self.cfg, []
        distance = _number(row, self.distance)
        if distance is not None and math.isfinite(distance) and step >= cfg.ema_stalled_warmup_steps:
            if self.gate.observe(self.distance, distance <= cfg.ema_stalled_max_distance, cfg.ema_stalled_patience):
                alerts.append(self._alert(step, "critical", self.distance, distance, (
                    f"target encoder equals the online encoder ({self.distance} = {_fmt(distance)} at step {step}): "
                    "the EMA momentum is effectively 0, which collapses the representation. Check first the EMA "
                    "schedule (ema.start/ema.end near 0.996-1.0), that the update is target = m*target + (1-m)*online "
                    "and not a load_state_dict copy, and that the two encoders do not share parameters.")))
        param_l2 = _number(row, "ema/param_l2")
        if param_l2 is not None and math.isfinite(param_l2):
            if self.last_param_l2 is not None and param_l2 != self.last_param_l2:
                self.param_moved = True
            self.last_param_l2 = param_l2
        present = {m: v for m in self.frozen_metrics if (v := _number(row, m)) is not None and math.isfinite(v)}
        if not present or step < cfg.warmup_steps:
            return alerts
        compared = [m for m in present if m in self.last_stats]
        tolerance = cfg.ema_frozen_rel_tolerance
        unchanged = bool(compared) and all(
            abs(present[m] - self.last_stats[m]) <= tolerance * abs(self.last_stats[m]) for m in compared)
        self.last_stats.update(present)
        if not unchanged:
            self.param_moved = False
        metric = next(iter(present))
        if self.gate.observe("target/frozen", unchanged and self.param_moved, cfg.ema_frozen_patience):
            alerts.append(self._alert(step, "critical", metric, present[metric], (
                f"target encoder is never updated: {', '.join(compared)} exactly unchanged at step {step} while "
                "ema/param_l2 keeps changing. Check first that the EMA update runs after every optimizer step "
                "(and is not skipped under gradient accumulation or a rank check), that it updates the same "
                "module the target forward uses, and that ema_tau is below 1.")))
        return alerts


class EmaRunawayRule(_RuleBase):
    name = "ema_runaway"
    metric = "ema/relative_param_l2"
    watches = frozenset({metric})

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__(cfg)
        self.reference = StepEwma(cfg.ema_runaway_window_steps)
        self.early_level: float | None = None
        self.previous: float | None = None

    def update(self, row: dict) -> list[Alert]:
        step, cfg = row["step"], self.cfg
        value = self._settled_reading(row, self.metric)
        if value is None:
            return []
        reference, previous = self.reference.value, self.previous
        self.reference.update(step, value)
        self.previous = value
        if self.early_level is None and step >= cfg.ema_runaway_reference_step:
            self.early_level = value
        jump = bool(reference) and value / reference > cfg.ema_runaway_jump_factor
        growing = (self.early_level is not None and self.early_level > 0 and previous is not None
                   and value > previous and value > cfg.ema_runaway_growth_factor * self.early_level)
        out_of_bounds = value > cfg.ema_runaway_max_distance or growing
        fired = self.gate.observe("jump", jump, 1)
        fired = self.gate.observe("bound", out_of_bounds, cfg.ema_runaway_patience) or fired
        if not fired:
            return []
        return [self._alert(step, "warning", self.metric, value, (
            f"the online encoder is running away from the target ({self.metric} = {_fmt(value)} at step {step}, "
            f"{'a sudden jump' if jump else 'growing without levelling off'}). Check first the learning rate (a "
            "blow-up moves the online weights faster than the EMA can follow; see grad_norm and loss), then "
            "whether the target is updated at all (ema_tau stuck at 1, frozen target statistics)."))]


class EmaScheduleRule(_RuleBase):
    name = "ema_schedule"
    metric = "ema_tau"
    watches = frozenset({metric})

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__(cfg)
        self.previous: float | None = None
        self.range_gate = EpisodeGate(rearm=cfg.rearm_readings)  # out of range and decreasing are separate faults

    def update(self, row: dict) -> list[Alert]:
        step = row["step"]
        value = _number(row, self.metric)
        if value is None:
            return []
        out_of_range = not 0.0 <= value <= 1.0  # also true for NaN
        decreasing = (self.previous is not None and math.isfinite(value)
                      and value < self.previous - self.cfg.ema_tau_decrease_tolerance)
        previous, self.previous = self.previous, value if math.isfinite(value) else self.previous
        alerts = []
        if self.range_gate.observe("range", out_of_range, 1):
            alerts.append(self._alert(step, "critical", self.metric, value, (
                f"ema_tau = {_fmt(value)} at step {step} is outside [0, 1]: the target update extrapolates instead "
                "of averaging. Check first ema.start / ema.end and the momentum schedule function.")))
        if self.gate.observe("decrease", decreasing, 1):
            alerts.append(self._alert(step, "warning", self.metric, value, (
                f"ema_tau decreased from {_fmt(previous or 0.0)} to {_fmt(value)} at step {step}; the momentum "
                "schedule should be non-decreasing (e.g. 0.996 -> 1.0). Check first ema.start <= ema.end, the "
                "schedule's total steps, and that a resume passes the global step, not a per-attempt counter.")))
        return alerts


class FalseComfortRule(_RuleBase):
    name = "false_comfort"
    metric = "pred_target/cosine"
    watches = frozenset({metric, *VarianceCollapseRule.metrics})

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__(cfg)
        self.tracks = {m: _Smoothed(cfg.smoothing_alpha) for m in VarianceCollapseRule.metrics}

    def update(self, row: dict) -> list[Alert]:
        step, cfg = row["step"], self.cfg
        if step < cfg.warmup_steps:
            return []
        for metric, track in self.tracks.items():
            value = _number(row, metric)
            if value is not None and math.isfinite(value):
                track.update(value)
        cosine = _number(row, self.metric)
        if cosine is None or not math.isfinite(cosine):
            return []
        ratios = [r for t in self.tracks.values() if t.count >= cfg.min_readings
                  and (r := t.fraction_of_peak()) is not None]
        collapsed = bool(ratios) and min(ratios) < cfg.false_comfort_variance_fraction
        if self.gate.observe(self.metric, cosine > cfg.false_comfort_cosine and collapsed, cfg.false_comfort_patience):
            return [self._alert(step, "critical", self.metric, cosine, (
                f"false comfort: predictions match targets (cosine {_fmt(cosine)}) only because target variance "
                f"fell to {_fmt(100 * min(ratios))}% of its peak at step {step}; a constant target is trivially "
                "predictable. Check first the EMA momentum and target/effective_rank; do not trust the loss."))]
        return []


class DivergenceRule(_RuleBase):
    name = "divergence"
    watches = frozenset({"grad_norm", "loss"})

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__(cfg)
        self.grad_baseline = RobustBaseline(cfg.divergence_baseline_alpha, min_scale=cfg.divergence_min_log_scale,
                                            scale_alpha=cfg.divergence_scale_alpha)
        self.cusum = OneSidedCusum(cfg.divergence_cusum_drift, cfg.divergence_cusum_threshold,
                                   cfg.divergence_cusum_clip)
        self.loss_baseline = RobustBaseline(cfg.divergence_baseline_alpha, scale_alpha=cfg.divergence_scale_alpha)

    def update(self, row: dict) -> list[Alert]:
        step, cfg, alerts = row["step"], self.cfg, []
        if step < cfg.divergence_warmup_steps:
            return []
        grad_norm = _number(row, "grad_norm")
        if grad_norm is not None and math.isfinite(grad_norm):
            log_grad = math.log(max(grad_norm, 1e-30))
            ready = self.grad_baseline.count >= cfg.min_readings
            climbing = self.cusum.update(self.grad_baseline.z(log_grad)) if ready else False
            self.grad_baseline.update(log_grad, suspect=self.cusum.total > cfg.divergence_suspect_level)
            if self.gate.observe("grad_norm", climbing, 1):
                base = math.exp(self.grad_baseline.center or 0.0)
                alerts.append(self._alert(step, "warning", "grad_norm", grad_norm, (
                    f"divergence: grad_norm has been climbing (now {_fmt(grad_norm)}, baseline ~{_fmt(base)}) up to "
                    f"step {step}, a sustained shift rather than a spike. Check first the learning rate (lower it or "
                    "lengthen warm-up), gradient clipping, and weight decay; watch the loss for a spike next.")))
        loss = _number(row, "loss")
        if loss is not None and math.isfinite(loss):
            center = self.loss_baseline.center
            self.loss_baseline.min_scale = max(1e-12, cfg.divergence_loss_min_rel_scale * abs(center or loss))
            z = self.loss_baseline.z(loss)
            spiking = self.loss_baseline.count >= cfg.min_readings and z > cfg.divergence_loss_z
            self.loss_baseline.update(loss)
            if self.gate.observe("loss", spiking, cfg.divergence_loss_patience):
                alerts.append(self._alert(step, "warning", "loss", loss, (
                    f"divergence: loss jumped to {_fmt(loss)} at step {step}, {_fmt(z)} scales above its running "
                    f"level {_fmt(center or 0.0)}. Check first the learning rate schedule (a blow-up), gradient "
                    "clipping, bad batches, and mixed-precision overflow; grad_norm usually moves with it.")))
        return alerts


class NotLearningRule(_RuleBase):
    name = "not_learning"
    metric = "grad_norm"
    watches = frozenset({metric})

    def update(self, row: dict) -> list[Alert]:
        step, cfg = row["step"], self.cfg
        value = self._settled_reading(row, self.metric)
        if value is None:
            return []
        if self.gate.observe(self.metric, value <= cfg.not_learning_max_grad_norm, cfg.not_learning_patience):
            return [self._alert(step, "warning", self.metric, value, (
                f"not learning: grad_norm = {_fmt(value)} at step {step}, near zero for "
                f"{cfg.not_learning_patience} readings. Check first that the loss depends on trainable parameters "
                "(no detach()/no_grad() around the predictor or context encoder, requires_grad=True), that the "
                "optimizer holds the online parameters, and that the target is not identical to the prediction."))]
        return []


def build_rules(cfg: RulesConfig) -> list[Rule]:
    """One instance of every §7 rule, configured by `cfg` (fresh state: use one set per stream)."""
    return [
        ImmediateThresholdRule(cfg, "mask_leak", "mask/overlap_fraction", cfg.mask_leak_max_overlap, (
            "mask leak: {value} of target patches also appear in the context at step {step}; the predictor can copy "
            "its answers. Check first the mask collator (context indices must exclude every target block) and "
            "faults.mask_leak_fraction.")),
        ImmediateThresholdRule(cfg, "target_gradients", "ema/target_grad_params", cfg.target_grad_max_params, (
            "target encoder receives gradients ({value} parameters hold or require a grad at step {step}): check "
            "that the target forward runs under torch.no_grad() and that its parameters have requires_grad=False "
            "and are not in the optimizer.")),
        NonFiniteRule(cfg),
        VarianceCollapseRule(cfg),
        DeadDimensionsRule(cfg),
        RankCollapseRule(cfg),
        EmaStalledRule(cfg),
        EmaRunawayRule(cfg),
        EmaScheduleRule(cfg),
        FalseComfortRule(cfg),
        DivergenceRule(cfg),
        NotLearningRule(cfg),
    ]
