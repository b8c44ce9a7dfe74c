"""Ground truth of the detection benchmark (design §8): which fault runs did harm, from when, and the two baselines
the rules are raced against. research/detection.py judges the library with it.

Each fault run is labelled by what the fault did, not by whether it was switched on. Harmful, from the first reading
after the onset at which one of these holds:

- evaluation falls: kNN accuracy or linear-probe accuracy EVAL_MARGIN or more below its best so far in the run and,
  since round 11, EVAL_COUNTERFACTUAL_MARGIN or more below what the run without the fault reads at the same step (a
  fall the healthy run makes too is not the fault's doing);
- the representation collapses: the target's pooled effective rank (RankMe over per-image features,
  `target/effective_rank`) or its per-dimension std (`target/std_mean`) below COLLAPSE_FRACTION of what the healthy
  run of the same setting and seed reads at the same step, for COLLAPSE_READINGS readings in a row, or at the last
  reading of that key in the run (since round 14: a halving under way when the library stops the run has no next
  reading to confirm it; every such run trained on, 10 of them, stayed halved at every new reading:
  research/label_check.py). The healthy run
  is the exact counterfactual: the fault run is branched from it and equals it bit for bit up to the onset. No fixed
  floor is used because none separates collapse from learning here: a healthy run's pooled rank falls three- to
  fourfold in its first few hundred steps (10.4 -> 3.7 on calib, 9.4 -> 2.7 on quick, seeds 3 and 0) and ends where
  a collapsing run ends, which is what defeated the fraction-of-peak rules of the first version;
- the run ends worse than random init (since issue 45, for fault and healthy runs alike): its kNN and its linear
  probe both read below their step-0 readings by more than the noise of a difference of two readings (sqrt(2) times
  one evaluation's) at the last evaluation, and at every one from the harm step (the first of that final stretch
  after the onset) on. The noise is the run's own, measured at step 0 (`<key>_noise`), or binomial on the probe-val
  half for records that did not measure it. Both, because on the shapes' short runs the probe alone barely leaves
  its random-init reading while the kNN climbs (calib's healthy runs end 1.3 points below on the probe, 4 above on
  the kNN): a run the two readings disagree on has not clearly lost anything;
- the loss or the gradient norm turns non-finite;
- a structural invariant of the method is broken: a target patch in the context (`mask/overlap_fraction` > 0), a
  target parameter that trains (`ema/target_grad_params` > 0), a target that is a copy of the online encoder
  (`ema/relative_param_l2`, or since round 9 the features' `ema/fixed_batch_distance`, exactly 0 at one reading) or
  one never updated (its statistics on a fixed batch, `target/fixed_batch_std_mean`, identical for
  INVARIANT_READINGS readings while those of the run without the fault changed between the same readings). These
  are logged facts about a broken method, harmful whatever the evaluation does in the run's remaining steps.

The collapse and frozen tests against the run without the fault do not apply to a healthy run itself. Its
evaluation fall is judged against the nearest stand-in for a run without a fault that it has: the other recorded
healthy runs of its setting (since round 43). It counts only EVAL_COUNTERFACTUAL_MARGIN or more below every one of
them at the same step, so a slide that another seed of the same setting makes too is the setting's, not harm. Before
that a healthy run's fall was judged against its own best alone, and four healthy runs of rounds 1-42 on 2-block
encoders and `quick` slid 5.2-6.7 points (none below every other seed of its setting): a check of the label that no
rule could meet (a label fixed after round 42 was read; no fault run's label changed). Until round 4 the frozen test
compared a run only with itself, and called the last readings of tiny seed 7, where a healthy target moved by less
than the library's six digits, frozen: a label fixed after round 3 was read. Until round 6 the copy test also asked
for INVARIANT_READINGS readings, which at a parameter-distance cadence of 500 took 1000 steps: a label fixed after
round 5 was read (the one case it changed is named in research/rounds.py).

Otherwise benign. A harmful run must be caught (an alert of any severity after the onset), and before both baselines
unless it is blunt: the loss itself shows it at its first reading after the onset (a divergence to NaN/Inf, a target
swapped for the online encoder mid-run), where a tie is the best any signal can do; since round 20, its first reading
that the fault could have changed (a row equal to the healthy run's in every value saw nothing of it); since round 44,
the evaluation baseline at that same row too (an evaluation read at the first row the fault changed: round 43's
`patch8` target trained from 330 tied with it at 336, which no signal could have beaten). A warning on a
benign run is allowed and counted; a critical alert on a benign or healthy run is a false alarm. Two baselines are
computed from the same stream: loss-only (a person watching the loss curve: the first non-finite loss, or a robust
z-score spike LOSS_Z scales above its running level) and evaluation (the first kNN accuracy EVAL_BASELINE_MARGIN
below its best).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from jepa_core.alerts.detectors import RobustBaseline

# Evaluation harm: a fall of EVAL_MARGIN below the run's best reading. It was 4 points until round 7, whose healthy
# quick seed 15 read kNN 4.05 points below an early peak while its probe climbed (the deepest healthy fall in 103
# runs on 9 settings; next 3.9 for the probe, tiny seed 8). One reading on 2048 held-out images carries about one
# point of noise, and a running best is biased up by it, so the margin is the healthy maximum plus that point.
EVAL_MARGIN = 0.05
# ... and the fall must leave the run without the fault behind: round 11's `smalldata` (kNN near chance, 0.19-0.27 on
# six classes) called a collapse of weight 0.6 harmful at step 300, 50 steps after its onset, where it read 5.2 points
# below its best and its healthy run 4.2 (1.0 apart; 2.3 above it at the next reading). Two points: twice one
# reading's noise. Of the three other evaluation labels of rounds 1-11 (lr x1000), none moves.
EVAL_COUNTERFACTUAL_MARGIN = 0.02
# The evaluation baseline keeps the 4 points it always had: a watcher who alarms on a smaller fall is earlier, so
# leads over it are not lengthened by the label's margin.
EVAL_BASELINE_MARGIN = 0.04
EVAL_KEYS = ("knn/accuracy", "linear_probe/val_acc")
COLLAPSE_FRACTION = 0.5  # rank or std halved against the run without the fault (a round number, set before judging)
COLLAPSE_READINGS = 2
COLLAPSE_KEYS = ("target/effective_rank", "target/std_mean")
INVARIANT_READINGS = 2
LOSS_Z, LOSS_WARMUP_STEPS = 6.0, 50  # the loss-only baseline: one reading 6 robust scales above its level


def _value(row: dict, key: str) -> float | None:
    v = row.get(key)
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def readings(rows: Iterable[dict], key: str) -> dict[int, float]:
    return {row["step"]: v for row in rows if (v := _value(row, key)) is not None}


def worse_than_init(rows: list[dict], onset: int, eval_count: int | None = None) -> int | None:
    """The first evaluation after `onset` from which every later one reads the kNN and the linear probe both below
    their step-0 (random-init) readings by more than the noise of a difference of two readings (sqrt(2) times one
    evaluation's); None when the run does not end so, or lacks a step-0 reading or a noise (neither measured nor an
    `eval_count` to take a binomial one from)."""
    first: int | None = None
    values = {key: readings(rows, key) for key in EVAL_KEYS}
    steps = sorted(set.intersection(*(set(v) for v in values.values())))
    if not steps or steps[0] != 0:
        return None
    margins = {}
    for key in EVAL_KEYS:
        init = values[key][0]
        noise = next((v for r in rows if r["step"] == 0 and (v := _value(r, key + "_noise")) is not None), None)
        if noise is None and eval_count:
            noise = math.sqrt(max(init * (1 - init), 0.25 / eval_count) / eval_count)
        if noise is None:
            return None
        margins[key] = (init, math.sqrt(2) * noise)
    for step in steps:
        below = all(not math.isfinite(values[key][step]) or values[key][step] < init - margin
                    for key, (init, margin) in margins.items())
        first = (first if first is not None else step) if below and step > onset else None
    return first


def harm(rows: list[dict], onset: int, healthy: list[dict] | None = None,
         siblings: Iterable[dict[str, dict[int, float]]] = (),
         collapse_fraction: float = COLLAPSE_FRACTION, eval_count: int | None = None) -> tuple[int | None, str | None]:
    """(first step > onset at which the run is harmed, why), or (None, None) for a benign run. `healthy`: the rows
    of the run without the fault (same setting and seed), for the collapse test; None for a healthy run itself.
    `siblings`: for a healthy run, the evaluation readings ({key: {step: value}}, sibling_evaluations) of the other
    healthy runs of its setting; its evaluation fall counts only below every one of them. `collapse_fraction`: the
    label's collapse test with another fraction, for a study of its edge (the label is COLLAPSE_FRACTION).
    `eval_count`: the images of the probe-val half, for the binomial noise of records that did not measure theirs."""
    siblings = list(siblings)
    worse_from = worse_than_init(rows, onset, eval_count)
    best: dict[str, float] = {}
    frozen = 0
    low = dict.fromkeys(COLLAPSE_KEYS, 0)
    reference = ({key: readings(healthy, key) for key in (*COLLAPSE_KEYS, *EVAL_KEYS)}
                 if healthy is not None else None)
    last_fixed: float | None = None
    last_fixed_step: int | None = None
    fixed_reference = readings(healthy, "target/fixed_batch_std_mean") if healthy is not None else {}
    # The last step at which each collapse key is read: a halving under way there has no next reading to confirm
    # it, and the run ends (or the library stops it) in that state.
    last_read = {key: max(readings(rows, key), default=None) for key in COLLAPSE_KEYS}
    for row in rows:
        step = row["step"]
        after = step > onset
        if worse_from is not None and step >= worse_from:
            return worse_from, "evaluation ends below random init"
        for key in ("loss", "grad_norm"):
            v = _value(row, key)
            if after and v is not None and not math.isfinite(v):
                return step, f"{key} non-finite"
        if after and (_value(row, "mask/overlap_fraction") or 0.0) > 0:
            return step, "mask overlap"
        if after and (_value(row, "ema/target_grad_params") or 0.0) > 0:
            return step, "target trains"
        # A distance of exactly 0 is conclusive at one reading (the target's weights, or its features, equal the
        # online ones to the last bit); "frozen" compares readings kept to six digits before round 9, so it needs
        # INVARIANT_READINGS of them. Two distance readings asked for 1000 steps at the default cadence of 500
        # (round 5: a target copying online from step 900 of 1200 was called benign, and the alert on it a false
        # alarm).
        if after and 0.0 in (_value(row, "ema/relative_param_l2"), _value(row, "ema/fixed_batch_distance")):
            return step, "target copies online"
        fixed = _value(row, "target/fixed_batch_std_mean")
        if fixed is not None:
            # Frozen only where the run without the fault moved between the same two readings: near the end of a
            # schedule the EMA momentum reaches 1 and the lr its floor, and a healthy target then changes by less
            # than the library's six digits (tiny seed 7 read 0.914207 three times from step 1560).
            ref_now, ref_last = fixed_reference.get(step), fixed_reference.get(last_fixed_step)
            moved = ref_now is not None and ref_last is not None and ref_now != ref_last
            frozen = frozen + 1 if after and moved and fixed == last_fixed else 0
            last_fixed, last_fixed_step = fixed, step
        if frozen >= INVARIANT_READINGS:
            return step, "target frozen"
        for key in EVAL_KEYS:
            v = _value(row, key)
            if v is None or not math.isfinite(v):
                continue
            ref = reference[key].get(step) if reference is not None else min(
                (r[step] for sibling in siblings if step in (r := sibling.get(key, {}))), default=None)
            below_healthy = ref is None or v <= ref - EVAL_COUNTERFACTUAL_MARGIN
            if after and key in best and v <= best[key] - EVAL_MARGIN and below_healthy:
                return step, f"{key} fell"
            best[key] = max(best.get(key, v), v)
        if reference is None or not after:
            continue
        for key in COLLAPSE_KEYS:
            v, ref = _value(row, key), reference[key].get(step)
            if v is None or ref is None or not math.isfinite(ref):
                continue
            low[key] = low[key] + 1 if (not math.isfinite(v) or v < collapse_fraction * ref) else 0
            if low[key] >= COLLAPSE_READINGS or (low[key] and step == last_read[key]):
                fell = "halved" if collapse_fraction == 0.5 else f"below {collapse_fraction:g} of healthy"
                return step, f"{key.split('/')[1]} {fell}"
    return None, None


def sibling_evaluations(rows_by_run: Iterable[list[dict]]) -> list[dict[str, dict[int, float]]]:
    """The evaluation readings of healthy runs, one {key: {step: value}} each: the `siblings` harm() takes."""
    return [{key: readings(rows, key) for key in EVAL_KEYS} for rows in rows_by_run]


def loss_baseline_step(rows: Iterable[dict], after: int = -1) -> int | None:
    """First step > `after` at which a loss-only watcher alarms: a non-finite loss, or one reading LOSS_Z robust
    scales above the loss's running level (its scale floored at 2% of the level)."""
    baseline = RobustBaseline(0.2, scale_alpha=0.05)
    for row in rows:
        loss = _value(row, "loss")
        if loss is None:
            continue
        if not math.isfinite(loss):
            if row["step"] > after:
                return row["step"]
            continue
        if row["step"] < LOSS_WARMUP_STEPS:
            continue
        baseline.min_scale = max(1e-12, 0.02 * abs(baseline.center if baseline.center is not None else loss))
        spiking = baseline.count >= 3 and baseline.z(loss) > LOSS_Z
        baseline.update(loss)
        if spiking and row["step"] > after:
            return row["step"]
    return None


def eval_baseline_step(rows: Iterable[dict], after: int = -1) -> int | None:
    """First evaluation after `after` whose kNN accuracy is EVAL_BASELINE_MARGIN or more below the best so far."""
    best = None
    for row in rows:
        acc = _value(row, "knn/accuracy")
        if acc is None:
            continue
        fell = not math.isfinite(acc) or (best is not None and acc <= best - EVAL_BASELINE_MARGIN)
        if best is not None and row["step"] > after and fell:
            return row["step"]
        if math.isfinite(acc):
            best = acc if best is None else max(best, acc)
    return None


def unchanged_row(row: dict, healthy_row: dict | None) -> bool:
    """Whether a fault run's row holds exactly the values of the healthy run's row at the same step."""
    if healthy_row is None:
        return False
    keys = set(row) - {"step", "attempt"}
    return keys == set(healthy_row) - {"step", "attempt"} and all(row[k] == healthy_row[k] for k in keys)
