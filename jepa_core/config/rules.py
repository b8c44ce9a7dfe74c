"""`RulesConfig`: the thresholds of the early-warning rules (design §7), plain data mapped onto the `[rules]` section.

The rules themselves live in `jepa_core.alerts`; every number they use is a field here so a run config can tune it.
Defaults were chosen on the tuning split of the detection library (research/library.py) and are reported on its
test split by research/detection.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from jepa_core.config.schema import (AtLeast1, FractionBelow1, MetricNames, NonNegative, OpenFraction, Positive, Rate,
                                     check_fields)


def split_names(text: str) -> tuple[str, ...]:
    """A comma-separated list of metric names, blanks dropped."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


# Keys of rules that were redesigned or removed (fraction-of-peak thresholds; dead_dimensions, ema_schedule and
# not_learning, which no recorded case could make fire). A config that still names them, such as a run directory
# written before, loads: the values are ignored.
RETIRED_KEYS = frozenset({
    "smoothing_alpha", "variance_fraction_of_peak", "variance_rate_window_steps", "variance_rate_min_ratio",
    "variance_patience", "dead_dim_rise", "dead_dim_max_fraction", "dead_dim_patience", "rank_fraction_of_peak",
    "rank_rate_window_steps", "rank_rate_min_ratio", "rank_patience", "pooled_rank_fraction_of_peak",
    "pooled_rank_rate_min_ratio", "ema_runaway_jump_factor", "ema_runaway_window_steps",
    "ema_runaway_reference_step", "ema_runaway_growth_factor", "ema_runaway_patience", "ema_tau_decrease_tolerance",
    "false_comfort_variance_fraction", "not_learning_max_grad_norm", "not_learning_patience",
})


@dataclass
class RulesConfig:
    """Thresholds of the early-warning rules. Plain data (int/float/bool/str) so it maps onto a TOML section; each
    field's type declares its range (config.schema)."""

    enabled: bool = True  # false turns every rule off (the stream is still written)
    stop_on_critical: bool = False  # the trainer stops (with a checkpoint) once a critical alert fires
    # shared
    # readings before this step build no references and never fire: the first steps' transients (the features
    # reorganise while the lr warms up) taught the trends a pace and a noise that healthy runs then broke
    warmup_steps: NonNegative[int] = 60
    min_readings: AtLeast1 = 3  # history-based rules need this many post-warm-up readings before judging
    rearm_readings: AtLeast1 = 5  # a rule fires again only after this many consecutive clear readings
    # mask_leak / target_gradients: critical at the first reading
    mask_leak_max_overlap: NonNegative[float] = 0.0  # mask/overlap_fraction above this is a leak
    target_grad_max_params: NonNegative[float] = 0.0  # ema/target_grad_params above this means the target trains
    # non_finite
    non_finite_metrics: MetricNames = "loss,grad_norm"  # comma-separated metric names that must stay finite
    # Trend breaks (variance_collapse, rank_collapse, ema_runaway): each signal's log against the level and slope it
    # kept itself (Holt smoothing per step), the shortfall in units of its own noise, summed by a one-sided CUSUM
    # (detectors.TrendBreak). A healthy run's drift, at the pace it keeps, adds about nothing; a fall faster than
    # that, held for several readings, adds up. Chosen on the tuning split of the detection library
    # (research/detection.py: healthy runs of three settings and five seeds, faults over magnitudes and onsets).
    trend_level_steps: Positive[float] = 20.0  # memory of the level, in steps
    # memory of the slope, in steps (100 was slow to learn a healthy fall's pace)
    trend_slope_steps: Positive[float] = 50.0
    trend_drift: NonNegative[float] = 2.0  # CUSUM allowance per reading, in noise scales
    # most one reading adds, in noise scales (minus the drift): one outlier never fires alone
    trend_clip: NonNegative[float] = 6.0
    trend_min_scale: NonNegative[float] = 0.01  # floor of the noise scale (a 1% move)
    # The noise scale is the running mean of |shortfall| over the first readings, then an EWMA this slow: a fast
    # one (0.1) grew with a collapse itself and hid it (a 30% fall over 150 steps scored 5.4, not 18.6).
    trend_scale_alpha: Rate = 0.02
    # CUSUM level for target/std_mean and target/std_l2n. 10 until round 5, where a collapse on `sparse` (readings
    # every 20 steps) reached 9.2; healthy runs of the tuning split (rounds 1-5) reached at most 5.1 (outside the
    # first-descent hold).
    variance_break: NonNegative[float] = 8.0
    # ... for target/fixed_batch_std_mean (healthy runs: at most 3.4)
    fixed_batch_variance_break: NonNegative[float] = 4.0
    # The fixed-batch trend judges from its third reading after warm-up (two innovations), the per-batch ones from
    # their fourth: the fixed batch has no sampling noise. At a parameter-distance cadence of 100 the third is at
    # step 300; round 6's collapses on `blocks` from step 200 did their harm by step 340 and reached 6.8-8.0 there
    # (healthy runs of rounds 1-6: at most 3.4, the same as when judged from the fourth).
    fixed_batch_trend_innovations: AtLeast1 = 2
    # ... and, since round 20, only once its readings after warm-up span this many steps (two slope memories):
    # the trend then knows a pace, not only a few readings. On a 2-block encoder (round 18's `shallow`, the fixed
    # batch every 33 steps) the third reading came at step 132, inside a healthy first descent 50-64% deep that it
    # learnt as noise and warned on (5 of 7 healthy runs, at 132-165). With 100, rounds 1-19 keep every catch and
    # lead, and healthy warnings fall from 8 in 207 runs to 3; 80-120 judge alike, 150 misses two `bigblocks`
    # collapses from step 150.
    fixed_batch_trend_min_steps: NonNegative[int] = 100
    # at or below this the features are constant, whatever the history (critical)
    variance_abs_floor: NonNegative[float] = 1e-6
    rank_break: NonNegative[float] = 8.0  # ... for target/token_effective_rank
    # rank_collapse also warns when target/token_effective_rank falls below this fraction of the features' width
    # (model.embed_dim): no history, so it sees a collapse that continues the first descent at its own pace, which
    # no trend or rested level can. Round 18's 2-block `shallow` collapses from step 165 fell so (4.25-9.99 of 96 at
    # step 264, 2.5-5.6 at 330) and nothing else caught them. On rounds 1-19 healthy runs went down to 0.148 of
    # their width (shallow seed 38; 0.165 outside shallow), and the one benign run below 0.1 was an lr x300 run
    # (warnings allowed). 0.06 to 0.1 catch the same runs; 0.08 keeps 1.85x below the lowest healthy run. 0: off.
    rank_floor_fraction: FractionBelow1 = 0.08
    # ... for target/effective_rank (noisier: RankMe of one batch of pooled features)
    pooled_rank_break: NonNegative[float] = 12.0
    # steady_collapse: target/fixed_batch_std_mean fallen steady_fall below its level when it last rested (changed at
    # most steady_stable_change over steady_window_steps steps). On the tuning split healthy runs fell at most 11.5%
    # below such a level (their early dip); the slow collapse the first test split missed fell 15% 140 steps after
    # its onset, 60 steps before harm. 1% instead of 2% for "rested" caught fewer collapses; a 200-step window
    # caught almost none (healthy runs rarely rest that long before a collapse's onset).
    steady_window_steps: Positive[int] = 100
    # most the fixed-batch spread may change over steady_window_steps and still count as rested
    steady_stable_change: NonNegative[float] = 0.02
    steady_fall: OpenFraction = 0.15  # fall of the fixed-batch spread below its rested level that warns
    # ... and target/std_mean (the per-batch spread, read at any cadence) fallen steady_batch_fall below where it
    # last rested, for two readings in a row (it is sampled: one low batch is not a fall). At the default cadences
    # the fixed batch is read every 500 steps, and round 5's collapses on `sparse` did their harm within 160 steps
    # of the onset. On the tuning split (rounds 1-5) healthy runs fell at most 2-3% on two readings in a row (one
    # warned at 2%, none at 3%; on single readings 5-6%); 0.1 caught the collapse from step 300 on `sparse` seed 0
    # 80 steps before its harm. 0 turns this half off.
    steady_batch_fall: FractionBelow1 = 0.1
    # ... and target/std_mean fallen steady_late_fall below its reading steady_late_window_steps earlier (two readings
    # in a row), from step steady_late_after_steps on. A collapse that continues a run's early descent never rests, so
    # neither reference above exists; where the fixed batch is read rarely (every 250 steps on `batch32`, rounds 7-8)
    # nothing else told it from a healthy descent. But healthy descents are early: on rounds 1-12 (130 healthy runs,
    # lr warm-ups of 40-100 steps) no healthy spread fell 20% in 100 steps after step 320, nor 15.2% after step 360,
    # while those collapses fell 30% in 100 steps by step 375-400, 25-50 steps before their harm. On the tuning split
    # after 300-400 steps, falls of 25-40% and windows of 75-150 steps judge alike (every harmful fault caught, one
    # healthy warning, none from this). With an lr warm-up much longer than 100 steps, raise the start with it.
    # 0 turns it off.
    steady_late_fall: FractionBelow1 = 0.3
    steady_late_window_steps: Positive[int] = 100  # how far back the late fall compares the per-batch spread
    steady_late_after_steps: NonNegative[int] = 360  # the late-fall check starts at this step
    # ... and a spread fallen steady_steep_fall (fixed batch) or steady_steep_batch_fall (per-batch, two readings in a
    # row) below its reading steady_steep_window_steps earlier, at any step after warm-up and not held by the first
    # descent: faster than any healthy run's spread fell at all, its first descent included. Chosen on rounds 1-28
    # (306 healthy runs): over 80 steps healthy spreads fell at most 60.3% (fixed batch) and 63.2% (per-batch, two
    # readings in a row), both in the 2-block `shallow` encoder's first descent; 70% and 72% leave them 1.3x the
    # spread a firing run has left. Three `shallow` collapses from 165, which continue its deep first descent, fire
    # at their harm step (33 steps before the trends and the rank floor saw them), three targets copying online 11-40
    # steps earlier than before, and `flatlr`'s collapse from 130 (seed 51, never alerted before) 40 steps after its
    # harm, only with the fixed batch at 0.68-0.70. No healthy or benign run fires. 0 turns one off.
    steady_steep_fall: FractionBelow1 = 0.7
    # fall of the per-batch spread over steady_steep_window_steps that warns
    steady_steep_batch_fall: FractionBelow1 = 0.72
    steady_steep_window_steps: Positive[int] = 80  # how far back the steep-fall checks compare
    # ... and target/fixed_batch_std_mean falling again: over the last steady_again_window_steps at least
    # steady_again_fall (log) and steady_again_factor times its slowest such fall since its steepest one (not held by
    # the first descent). Round 13's `px48` collapse of weight 1.2 from step 300 continued a first descent that had
    # been slowing for 100 steps (2% per 40 steps), never resting and never 30% deep before step 360, and no trend
    # broke (the fixed batch's noise scale, learnt on the descent's curve, is ~2% a reading): the evaluation
    # baseline saw it at 400, the rules at 444. Its fall over 40 steps was 8.1% at 360, four times its slowest since
    # the steepest. Healthy runs of rounds 1-13 (141) never fell again at 3x their slowest pace by more than 1.1% per
    # 40 steps. Factors 2-4, falls 0.02-0.08 and windows of 20-60 steps give the same catches and no healthy warning
    # on rounds 1-13. 0 turns it off.
    steady_again_fall: NonNegative[float] = 0.05
    # how many times its slowest fall since the steepest the spread must fall again
    steady_again_factor: NonNegative[float] = 3.0
    steady_again_window_steps: Positive[int] = 40  # the window the falling-again check measures over
    # Both variance rules hold their warnings while target/fixed_batch_std_mean is in its first descent (from its
    # peak until it climbs first_descent_recovery back off its low), less than first_descent_fall below that peak
    # and at most first_descent_max_steps past it. 0 turns the hold (or the bound) off. 0.22 until round 12: on rounds
    # 1-3 healthy first descents warned at most 19.9% deep (tiny seed 7), but rounds 11 and 12 warned on healthy
    # descents 24.5%, 27.8% and 22.3% deep (quick, smalldata, px48). 0.3 silences all three (healthy warnings on
    # rounds 1-12: 4 -> 1 in 130) and still catches every collapse the hold met, all but one (a `wide` collapse, 20
    # steps after its harm) at or before harm; 0.28 too, with no margin over the 27.8%. The bound keeps a collapse
    # inside a long shallow descent from hiding for good (tiny seed 2's descent lasted 1,160 steps; its collapse
    # from step 800 was missed at 0.3 without it). Healthy descents that ended warned none; 400-600 judge alike.
    first_descent_fall: FractionBelow1 = 0.3
    # climb off its low that ends the fixed-batch spread's first descent
    first_descent_recovery: NonNegative[float] = 0.02
    first_descent_max_steps: NonNegative[int] = 500  # longest a first descent holds the variance rules, past its peak
    # ... except a fall of the per-batch spread (target/std_mean) that steady_collapse's references and
    # variance_collapse's trend both call a fall at the same reading: below where it rested (or where it was
    # steady_late_window_steps earlier) and faster than its own trend and noise allow. Round 15's `narrow` collapse of
    # weight 0.25 from step 175 was such a fall from step 252 (its trend's CUSUM 8 to 14) and was held until its
    # harm at 350: its healthy runs barely descend, so the collapse's own fall was the first descent. On rounds 1-15
    # the healthy runs' per-batch trend stood at most at 2.2 (threshold 8) at a held reference fall (defaults seed 3,
    # step 360): no healthy or benign run warned that did not before, and 12 harmful runs had a steady_collapse
    # alert 10-60 steps earlier (the first alert on two, `defaults` collapses, by 60). The fixed batch, whose trend
    # threshold of 4 a healthy descent came within 0.3 of (tiny seed 7), is left to the hold. False: hold both.
    steady_trend_confirms: bool = True
    # online_collapse: the ratio online/fixed_batch_std_mean / target/fixed_batch_std_mean below online_lead_floor and
    # online_lead_fall times below its highest reading of the last online_lead_window_steps steps (after warm-up).
    # The metric is logged since round 32; chosen on round 34, the study round (17 healthy runs of 13 settings, 18
    # fault runs). Healthy online encoders dip to 0.105-0.37 of their target early in a run (quick, hotlr, shallow
    # lowest), but over several readings: below 0.15 a healthy ratio stood at most 1.75x below its recent high, and
    # below 0.2 at most 2.55x (smalldata's dip). Every collapse dropped it 2.9-6.8x between two readings, to
    # 0.057-0.121: the first-descent misses (augment 0.34 from 100, thinpred 0.45 and 1.4 from 110) 68-88 steps
    # before their harm, where no other rule spoke. 0.15 and 2.25 sit between the two (geometric means); windows of
    # 40-70 steps judge alike, 30 misses a collapse on `shallow`, read every 33 steps: the window must span a reading.
    # A rule of the online encoder: silent on streams without the metric (rounds 1-31). 0 turns it off.
    online_lead_floor: NonNegative[float] = 0.15
    online_lead_fall: NonNegative[float] = 2.25  # times below its recent high the online/target spread ratio must fall
    # the recent high of the online/target ratio is over this many steps
    online_lead_window_steps: NonNegative[int] = 60
    # ... judged only from online_lead_after_warmups lr warm-ups into the run (optim.warmup_steps, from the run's
    # config; unknown without it, and then judged from the rules' warm-up). Round 33's never-tuned `heads8` (eight
    # heads, the lr ramped from 1e-5 to 9e-4 over 60 steps) showed why: its healthy online spread fell 3.1-4.8x to
    # 0.10-0.18 of the target's within 30 steps of the warm-up's end and climbed back by 240-330, as steep as a
    # collapse, and warned on 4 of 5 healthy runs at 90-120 (1.5-2 warm-ups). On rounds 32-34 (now tuning data) the
    # latest healthy fall came at 2 warm-ups, the earliest catch that no later one replaces at 2.5 (heads8's
    # collapse of 1.02 from 125, at 150; stretch, augment, cosema, thinpred, smalldata: 2.8-4.2); 2.25 between them.
    # Healthy `calib` (a warm-up of 50) then fell 2.9-3.7x at 2.2-2.4 warm-ups on seeds 74-76, still that low at
    # 2.6 (rounds 37-38: 3 warnings on 26 healthy runs); on rounds 1-38 the earliest catch that no other rule makes
    # before a baseline is at 2.89 (fastema's lr x17.5 from 104, at 130): 2.75. heads8's collapses from 125, caught
    # at 150 with the shorter wait, are caught at 180 (variance_collapse and online_collapse), 20-40 steps before
    # their harm and before both baselines.
    online_lead_after_warmups: NonNegative[float] = 2.75
    # predictor_collapse: pred/std_mean (the spread of the predictor's outputs over the batch) below this fraction of
    # its highest reading of the last predictor_collapse_window_steps steps (from warmup_steps). Chosen on rounds
    # 1-40 (research/predictor_spread.py): the 464 healthy runs fell at most to 0.31 (0.27 over 60 steps), and 34
    # harmful runs (lr blow-ups) fell below 0.2 before any other rule spoke, `smallctx`'s lr x35 from 140 (seed 4)
    # to 0.04 at 147, where the loss jumped only at 168. 0 turns it off.
    predictor_collapse_fraction: FractionBelow1 = 0.2
    predictor_collapse_window_steps: NonNegative[int] = 40  # the predictor spread's recent high is over this many steps
    # ema_stalled: ema/relative_param_l2 or ema/fixed_batch_distance at exactly 0 (target copies online), or target
    # statistics exactly frozen while ema/param_l2 or ema/fixed_batch_distance keeps changing (target never updated)
    ema_stalled_warmup_steps: NonNegative[int] = 1  # at step 0 the target copies the online encoder by construction
    # a target-online distance at or below this means the target copies online
    ema_stalled_max_distance: NonNegative[float] = 0.0
    # ... or the logged EMA momentum below this (0 turns it off): healthy JEPA, BYOL and DINO targets run at
    # 0.98-1.0 (the detection library's lowest, fastema's start, is 0.98); below a half the target is mostly the
    # online encoder of the last update
    ema_stalled_max_momentum: FractionBelow1 = 0.5
    ema_stalled_patience: AtLeast1 = 1  # a distance of exactly 0 after step 0 is conclusive at once
    # statistics of the target on a FIXED probe batch (diagnostics.fixed_batch_every_steps): bit-identical iff never
    # updated
    ema_frozen_metrics: MetricNames = "target/fixed_batch_std_mean,target/fixed_batch_norm_mean"
    # readings in a row with both statistics unchanged: 3 until round 6, where at a parameter-distance cadence of 100
    # a target frozen from the onset had two readings in the 200 steps the library trains past it (and at the
    # defaults' 500, three readings take 1500 steps). With 2, no healthy or benign run of rounds 1-6 fires.
    ema_frozen_patience: AtLeast1 = 2
    # a relative change up to this between readings counts as "unchanged"
    ema_frozen_rel_tolerance: NonNegative[float] = 0.0
    # ema_runaway: ema/relative_param_l2 climbing faster than its own trend, or beyond the weights' own norm
    ema_runaway_break: NonNegative[float] = 8.0
    # a relative weight distance above this (the weights' own norm) is a runaway
    ema_runaway_max_distance: NonNegative[float] = 1.0
    # ... or a distance this many times its previous reading (0 turns a jump off): ema/relative_param_l2 and
    # ema/fixed_batch_distance. Chosen on rounds 1-25 (research/distance_jumps.py): healthy runs jump at most 1.8x
    # (weights) and 2.4x (features) in one reading; 231 of the 251 harmful lr blow-ups jump 3x in the weights.
    # Round 37's `slowlr` (a warm-up of 100 from 1e-5) made healthy feature distances jump 3.8-4x inside the warm-up,
    # where the lr summed so far grows about as the step squared: since then the feature distance's jump is divided
    # by the schedule's own growth between the two readings (`--per-lr`). On rounds 1-37 the largest healthy jump is
    # then 2.07x (raw 4.04x), the weights' 1.80x (the weights' distance is not divided: read 60-500 steps apart, a
    # blow-up's summed lr would hide its jump; 328 of 351 harmful lr blow-ups jump 3x raw, 311 divided).
    ema_runaway_jump_ratio: NonNegative[float] = 3.0
    # ... the same for the fixed-batch feature distance, divided by the lr schedule's growth
    ema_runaway_feature_jump_ratio: NonNegative[float] = 3.0
    # false_comfort: variance and rank collapsing at once (both trend rules in their condition) while the prediction
    # still matches the target
    false_comfort_cosine: NonNegative[float] = 0.5
    false_comfort_patience: AtLeast1 = 1  # readings in a row in the condition before a warning
    # ... a warning at its first reading, critical once it has held this many readings in a row (1: critical at once).
    # Rounds 22 and 24's two critical false alarms (benign lr blow-ups) came at the last reading of their runs.
    false_comfort_critical_readings: AtLeast1 = 2
    # divergence: one-sided CUSUM on log grad_norm against a robust running baseline, and loss z-score spikes
    divergence_warmup_steps: NonNegative[int] = 50  # lr warm-up makes grad_norm climb on healthy runs
    divergence_baseline_alpha: Rate = 0.2  # per-reading weight of the robust baseline (log grad_norm and loss)
    divergence_scale_alpha: Rate = 0.05  # slower: a noise scale needs more readings than a centre
    # floor of the log-grad-norm noise scale (10% moves are "one scale")
    divergence_min_log_scale: NonNegative[float] = 0.1
    divergence_cusum_drift: NonNegative[float] = 1.0  # allowance per reading, in scales
    divergence_cusum_threshold: NonNegative[float] = 10.0  # alarm level, in scales (health/update_ratio)
    # ... for grad_norm: 10 until round 6, where healthy runs on `blocks` climbed to 10.2 and 11.8 in the second half
    # of training (the other healthy runs of rounds 1-6: at most 6.8). No harmful case of the library needed the
    # gradient-norm shift to be caught or caught early (with it off: the same catches and leads).
    divergence_grad_norm_threshold: NonNegative[float] = 20.0
    # above this CUSUM level the baseline learns 4x slower (no absorbing)
    divergence_suspect_level: NonNegative[float] = 8.0
    # most one reading can add: one spike adds <= clip - drift < threshold
    divergence_cusum_clip: NonNegative[float] = 5.0
    # One grad_norm reading this many times its running level. 10 until round 10: a target copying online from step
    # 200 on `mse` (no gradient clipping) read 7.4x at its first reading after the onset, 40 steps before the loss
    # showed it; the healthy runs of rounds 1-10 (108) read at most 4.3x (`defaults` seed 3), the next 4.15x.
    divergence_grad_spike_factor: NonNegative[float] = 6.0
    divergence_loss_z: NonNegative[float] = 6.0  # a loss this many noise scales above its running baseline is a spike
    divergence_loss_min_rel_scale: NonNegative[float] = 0.02  # loss scale floor, relative to the baseline loss
    # a loss spike must persist this many readings (a lone noisy batch is not one)
    divergence_loss_patience: AtLeast1 = 2
    # target/std_mean climbing faster than its own trend (a rising TrendBreak, the trend_* settings): healthy runs of
    # the tuning split (rounds 1-5) reached at most 2.6; the x10 lr blow-up on `sparse` that round 5 missed reached
    # 6.3. 0 turns it off.
    divergence_spread_break: NonNegative[float] = 6.0
    # pred_target/cosine this fraction or more below its highest reading of the last agreement window: the predictor
    # has lost the target. Healthy runs of rounds 1-37 (427) fall at most 12.9% within 30 steps (19.1% within 60, 32%
    # from their peak over a whole run); `cosema`'s lr x5 from 110, which no other rule caught, fell 37% in 22 steps
    # (seed 74). 0 turns it off. The window was 30 steps until round 43: `cosema`'s lr x5 from 110 on seed 3 lost the
    # target more slowly (15% within 30 steps, 24% within 45, at its harm step); within 45 steps the 488 healthy runs
    # of rounds 1-42 fall at most 15.7% (`predheavy` seed 54 after its warm-up), still 4 points short of the alarm.
    divergence_agreement_fall: FractionBelow1 = 0.2
    # the prediction agreement's recent high is over this many steps
    divergence_agreement_window_steps: NonNegative[int] = 45
    # eval_regression (jepa_core.alerts.evaluation): a kNN or probe reading below the step-0 (random-init) reading by
    # more than this many noises of a difference of two readings (sqrt(2) times one evaluation's noise, measured at
    # step 0) is critical; both below their best by as much, a warning. 0 turns it off.
    eval_regression_noise_multiple: NonNegative[float] = 3.0

    def validate(self) -> RulesConfig:
        """Raise ConfigError (a ValueError) naming `rules.<key>` for a value no rule can use; returns self."""
        check_fields("rules", self)
        return self
