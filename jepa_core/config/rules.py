"""`RulesConfig`: the thresholds of the early-warning rules (design §7), plain data mapped onto the `[rules]` section.

The rules themselves live in `jepa_core.alerts`. A threshold a user might tune is a field here, with its unit and one
line of why; docs/design.md §7 holds them in one table. What is not a threshold stays in the code, named: the
estimators' own constants (`jepa_core.alerts.detectors`) and the levels that are exact by definition (a leak is any
target patch in the context; a distance of exactly 0 is a copy). Defaults were chosen on the tuning split of the
detection library and the digits (research/detection.py) and are reported on test splits recorded after.

Time is counted in the run's own units, named by each field's suffix (`jepa_core.alerts.clock`): `_readings` (basic
readings, `diagnostics.basic_every_steps` apart), `_warmups` (the lr warm-up, `optim.warmup_steps`) and `_fraction`
of the schedule (`optim.steps`). No rule counts steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from jepa_core.config.schema import (AtLeast1, FractionBelow1, MetricNames, NonNegative, OpenFraction, Positive,
                                     check_fields)


def split_names(text: str) -> tuple[str, ...]:
    """A comma-separated list of metric names, blanks dropped."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


# Keys of rules and thresholds that were removed, merged or re-expressed. A config that still names them, such as a
# run directory written before, loads: the values are ignored (`jepa doctor` judges old runs by today's rules).
RETIRED_KEYS = frozenset({
    # fraction-of-peak thresholds; dead_dimensions, ema_schedule and not_learning, which no case made fire
    "smoothing_alpha", "variance_fraction_of_peak", "variance_rate_window_steps", "variance_rate_min_ratio",
    "variance_patience", "dead_dim_rise", "dead_dim_max_fraction", "dead_dim_patience", "rank_fraction_of_peak",
    "rank_rate_window_steps", "rank_rate_min_ratio", "rank_patience", "pooled_rank_fraction_of_peak",
    "pooled_rank_rate_min_ratio", "ema_runaway_jump_factor", "ema_runaway_window_steps",
    "ema_runaway_reference_step", "ema_runaway_growth_factor", "ema_runaway_patience", "ema_tau_decrease_tolerance",
    "false_comfort_variance_fraction", "not_learning_max_grad_norm", "not_learning_patience",
    # issue 45: time in steps, now in the run's own units
    "warmup_steps", "trend_level_steps", "trend_slope_steps", "fixed_batch_trend_min_steps", "steady_window_steps",
    "steady_late_window_steps", "steady_late_after_steps", "steady_steep_window_steps", "steady_again_window_steps",
    "first_descent_max_steps", "online_lead_window_steps", "predictor_collapse_window_steps",
    "ema_stalled_warmup_steps", "divergence_warmup_steps", "divergence_agreement_window_steps",
    # issue 45: merged into one threshold each, or made constants of the estimators and definitions
    "variance_break", "rank_break", "ema_runaway_break", "divergence_spread_break", "fixed_batch_variance_break",
    "fixed_batch_trend_innovations", "steady_stable_change", "first_descent_recovery", "steady_batch_fall",
    "steady_steep_batch_fall", "steady_again_fall", "steady_again_factor", "online_lead_window_steps",
    "ema_stalled_max_distance", "ema_stalled_patience", "ema_frozen_patience", "ema_frozen_rel_tolerance",
    "ema_runaway_max_distance", "ema_runaway_feature_jump_ratio", "ema_stalled_max_momentum",
    "false_comfort_patience", "false_comfort_critical_readings", "mask_leak_max_overlap", "target_grad_max_params",
    "variance_abs_floor", "trend_clip", "trend_min_scale", "trend_scale_alpha", "divergence_baseline_alpha",
    "divergence_scale_alpha", "divergence_min_log_scale", "divergence_cusum_drift", "divergence_cusum_threshold",
    "divergence_grad_norm_threshold", "divergence_suspect_level", "divergence_cusum_clip",
    "divergence_grad_spike_factor", "divergence_loss_z", "divergence_loss_min_rel_scale", "divergence_loss_patience",
    "divergence_agreement_window_readings", "online_lead_window_readings", "predictor_collapse_window_readings",
    "steady_steep_window_readings", "steady_late_after_readings", "fixed_batch_trend_min_warmups", "min_readings",
    "steady_again_window_readings", "first_descent_max_warmups",
    # a trial of the same in lr warm-ups, written into one recorded digits run's config (research/data/real)
    "settle_warmups", "trend_level_warmups", "trend_slope_warmups", "steady_window_warmups",
    "steady_late_window_warmups", "steady_late_after_warmups", "steady_steep_window_warmups",
    "steady_again_window_warmups", "online_lead_window_warmups", "predictor_collapse_window_warmups",
    "divergence_settle_warmups", "divergence_agreement_window_warmups",
})


@dataclass
class RulesConfig:
    """Thresholds of the early-warning rules. Plain data (int/float/bool/str) so it maps onto a TOML section; each
    field's type declares its range (config.schema)."""

    enabled: bool = True  # false turns every rule off (the stream is still written)
    stop_on_critical: bool = False  # the trainer stops (with a checkpoint) once a critical alert fires
    non_finite_metrics: MetricNames = "loss,grad_norm"  # comma-separated metric names that must stay finite
    # the target's statistics on the fixed probe batch: bit-identical between readings iff the target never updates
    ema_frozen_metrics: MetricNames = "target/fixed_batch_std_mean,target/fixed_batch_norm_mean"

    # readings before this build references but never fire: early transients would teach a trend a false pace
    settle_readings: NonNegative[float] = 6.0
    rearm_readings: AtLeast1 = 5  # clear readings in a row before a rule may fire again (one alert per episode)
    confirm_readings: AtLeast1 = 2  # readings in a row that turn a sampled or one-off reading into evidence
    trend_level_readings: Positive[float] = 2.0  # a trend's memory of its level: short, so a fall shows within readings
    trend_slope_readings: Positive[float] = 5.0  # a trend's memory of its slope: long enough to learn a healthy pace
    trend_drift: NonNegative[float] = 2.0  # a trend's CUSUM allowance per reading, in noise scales: drift adds nothing
    # CUSUM level that calls a trend broken (per-batch spreads, token rank, target-online distance, a climbing spread)
    trend_break: NonNegative[float] = 8.0
    # CUSUM level for the fixed probe batch's spread, which has no sampling noise, so a lower level already tells
    fixed_batch_break: NonNegative[float] = 6.0
    pooled_rank_break: NonNegative[float] = 15.0  # CUSUM level for RankMe of one batch of pooled features, the noisiest
    # rank_collapse: the patch tokens' rank below this fraction of the features' width, with no history (0: off)
    rank_floor_fraction: FractionBelow1 = 0.1
    # steady_collapse: a spread this far below the level where it last rested
    steady_fall: OpenFraction = 0.15
    steady_window_readings: Positive[float] = 8.0  # how long a spread must hold to count as rested; the steep window
    rest_change: NonNegative[float] = 0.015  # a move this small is no move (a rested spread; a first descent's end)
    # steady_collapse: the per-batch spread this far below its reading steady_late_window_readings earlier, late on
    steady_late_fall: FractionBelow1 = 0.25
    steady_late_window_readings: Positive[float] = 4.0  # how far back the late fall compares
    steady_late_after_fraction: FractionBelow1 = 0.36  # the part of the run healthy early descents may take
    # steady_collapse: a spread this far below its reading steady_window_readings earlier, at any time (0: off)
    steady_steep_fall: FractionBelow1 = 0.7
    # variance rules hold warnings while the fixed batch's spread is in its first descent and less than this deep
    first_descent_fall: FractionBelow1 = 0.3
    # a per-batch fall from a reference that also breaks its trend is not held (healthy descents never do both)
    steady_trend_confirms: bool = True
    online_lead_floor: NonNegative[float] = 0.15  # online_collapse: the online spread below this fraction of the target's
    online_lead_fall: NonNegative[float] = 2.25  # online_collapse: and this many times below its recent high
    online_lead_after_warmups: NonNegative[float] = 2.75  # online_collapse judges from here: after a warm-up it dips
    # the window a recent high is taken over (online/target spread, predictor spread, prediction agreement)
    recent_high_readings: NonNegative[float] = 5.0
    # predictor_collapse: the predictor's output spread below this fraction of its recent high (0: off)
    predictor_collapse_fraction: FractionBelow1 = 0.2
    # false_comfort: predictions this close to the targets (cosine) while variance and rank both break
    false_comfort_cosine: NonNegative[float] = 0.5
    # ema_runaway: a target-online distance this many times its previous reading (a feature distance divided by the
    # lr schedule's own growth between the two; 0: off)
    ema_runaway_jump_ratio: NonNegative[float] = 3.0
    divergence_settle_fraction: FractionBelow1 = 0.083  # divergence leaves the run's first part to the lr warm-up
    # divergence: CUSUM level of log grad_norm and of the update ratio over their robust running levels
    divergence_shift_break: NonNegative[float] = 25.0
    # divergence: one reading grad_norm this many times its level, or the loss this many noise scales above it
    divergence_spike: NonNegative[float] = 6.0
    # divergence: the prediction agreement this fraction below its recent high (0: off)
    divergence_agreement_fall: FractionBelow1 = 0.2
    # eval_regression: a kNN or probe reading this many noises of a difference below random init (critical; 0: off)
    eval_regression_noise_multiple: NonNegative[float] = 3.0

    def validate(self) -> RulesConfig:
        """Raise ConfigError (a ValueError) naming `rules.<key>` for a value no rule can use; returns self."""
        check_fields("rules", self)
        return self
