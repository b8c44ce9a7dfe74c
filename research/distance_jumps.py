"""How far the target-online distance and the update ratio jump in one reading, healthy runs against lr blow-ups.

Round 25's two misses (`flatlr`: lr x9.5 and x42 from step 390 of a flat lr schedule) scrambled the representation
rather than collapsing it: spreads and ranks rose, the loss climbed slowly, the probe fell. What moved first was the
distance between target and online encoder: the features' distance on the fixed probe batch
(`ema/fixed_batch_distance`, read every 26 steps there) 3.5x and 6x its previous reading at its first reading after
the onset, the weights' (`ema/relative_param_l2`) 4x and 7x, the update ratio 5x and 4x. The trend and level-shift
rules that read the last two add a capped amount per reading, so one reading, however large, could not fire them.

This counts, for each of those signals, how often a reading is at least a given ratio of the previous one (from the
rules' warm-up on, as the rule judges it): over the healthy runs (what a rule on one jump would cost in warnings,
with the largest ratio any healthy run reached) and over the harmful lr blow-ups (what it would catch, and when
against the harm step). Each split is printed apart. It chose `ema_runaway`'s jump ratios (3x for either
distance: rules.ema_runaway_jump_ratio, rules.ema_runaway_feature_jump_ratio) on rounds 1-25, where healthy runs
reach 1.8x (weights) and 2.4x (features); the update ratio jumps as far on healthy runs as on blow-ups, and no rule
reads it for a jump. Read-only.

    python research/distance_jumps.py
    python research/distance_jumps.py --ratios 2 3 4
    python research/distance_jumps.py --cases flatlr/lr_blowup_9.5_at390_s2   # ... and when each signal jumped
    python research/distance_jumps.py --per-lr   # each jump over what the run's lr schedule alone explains

With --per-lr each distance's ratio is divided by the ratio of the lr summed over the run's updates up to the two
readings (the schedule of its config.toml, without any fault; the update ratio, one step's, stays as it is): while
the lr ramps up linearly the distance grows about as that sum, the square of the step, so two readings 32 and 64 steps into a warm-up differ fourfold in a healthy run (round 37's
`slowlr`: every healthy run warned `ema_runaway` at 64). A study for a change to the rule, which reads only the raw
ratio today; its figures on rounds 35-37 make them tuning data for any rule chosen with it.
"""

from __future__ import annotations

import argparse
import math
import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detection import judge, library_cases  # noqa: E402
from ground_truth import readings  # noqa: E402
from library import LIBRARY, load_case  # noqa: E402

from jepa_core.config.rules import RulesConfig  # noqa: E402
from jepa_core.method.schedules import LrSchedule  # noqa: E402

SIGNALS = ("ema/fixed_batch_distance", "ema/relative_param_l2", "health/update_ratio")
DISTANCES = SIGNALS[:2]  # what --per-lr divides: they add up the updates; the update ratio is one step's


def lr_sums(optim: dict) -> list[float]:
    """The lr summed over the updates a row at each step follows: [0] = nothing yet, [s] = updates 0..s-1 (the run's
    schedule from its config's [optim] section, faults left out; LrSchedule.summed, as ema_runaway reads it)."""
    schedule = LrSchedule(optim["lr"], optim["start_lr"], optim["final_lr"], optim["warmup_steps"], optim["steps"])
    return [schedule.summed(s) for s in range(optim["steps"] + 1)]


def jumps(rows: list[dict], key: str, after: int, lr_sum: list[float] | None = None) -> list[tuple[int, float]]:
    """(step, ratio to the previous reading) of every finite reading of `key` past `after` whose previous finite
    reading is positive (a copy's distance of 0 at step 0 is no reference); with `lr_sum` (lr_sums), each ratio over
    the ratio of the lr summed up to the two readings."""
    out, last = [], None
    for step, value in sorted(readings(rows, key).items()):
        if not math.isfinite(value):
            continue
        if last is not None and step > after and last[1] > 0:
            ratio = value / last[1]
            if lr_sum is not None:
                before, now = (lr_sum[min(s, len(lr_sum) - 1)] for s in (last[0], step))
                ratio = ratio * before / now if before > 0 else ratio
            out.append((step, ratio))
        last = (step, value)
    return out


def first_jump(rows: list[dict], key: str, ratio: float, after: int, lr_sum: list[float] | None = None) -> int | None:
    """The first step past `after` whose reading of `key` is `ratio` times the previous reading or more."""
    return next((step for step, r in jumps(rows, key, after, lr_sum) if r >= ratio), None)


def largest_jump(rows: list[dict], key: str, after: int, lr_sum: list[float] | None = None) -> float:
    """The largest ratio of a reading of `key` to the previous one past `after` (0 without two readings)."""
    return max((r for _, r in jumps(rows, key, after, lr_sum)), default=0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ratios", type=float, nargs="+", default=[2.0, 2.5, 3.0])
    parser.add_argument("--cases", nargs="*", default=[], help="setting/name: print each signal's first jump")
    parser.add_argument("--per-lr", action="store_true", help="divide each jump by the lr schedule's own growth")
    args = parser.parse_args(argv)
    warmup = RulesConfig().warmup_steps
    runs = []  # (split, key, harmful lr blow-up or healthy, onset or warm-up, harm step, rows, lr sums or None)
    for case_dir in library_cases():
        j = judge(case_dir)
        if j.fault is None or (j.fault == "lr_blowup" and j.harmful):
            after = warmup - 1 if j.onset is None else j.onset  # the rule judges from the warm-up's step on
            sums = lr_sums(tomllib.loads((case_dir / "config.toml").read_text())["optim"]) if args.per_lr else None
            runs.append((j.split, j.key, j.fault is None, after, j.harm_step, load_case(case_dir)[1], sums))
    for split in ("tune", "test"):
        healthy = [r for r in runs if r[0] == split and r[2]]
        blowups = [r for r in runs if r[0] == split and not r[2]]
        print(f"{split} split: {len(healthy)} healthy runs, {len(blowups)} harmful lr blow-ups; "
              "a reading at least RATIO x the previous one (healthy: after the rules' warm-up; blow-ups: after the onset)")
        for key in SIGNALS:
            def sums(run: tuple) -> list[float] | None:
                return run[6] if key in DISTANCES else None
            top = max(((largest_jump(r[5], key, r[3], sums(r)), r[1]) for r in healthy), default=(0.0, "-"))
            print(f"  {key:26s} largest healthy jump {top[0]:.2f}x ({top[1]})")
            for ratio in args.ratios:
                warned = [r[1] for r in healthy if first_jump(r[5], key, ratio, r[3], sums(r)) is not None]
                steps = [(first_jump(r[5], key, ratio, r[3], sums(r)), r[4]) for r in blowups]
                caught = [(s, h) for s, h in steps if s is not None]
                early = sum(h is None or s <= h for s, h in caught)
                print(f"  {key:26s} {ratio:g}x: healthy {len(warned)}/{len(healthy)}"
                      + (f" ({', '.join(warned[:3])})" if warned else "")
                      + f"; lr blow-ups {len(caught)}/{len(blowups)}, {early} at or before harm")
    for name in args.cases:
        j = judge(LIBRARY / name)
        rows = load_case(LIBRARY / name)[1]
        after = warmup - 1 if j.onset is None else j.onset
        print(f"{j.key}: harm {j.harm_step} ({j.harm_why}), loss-only baseline {j.loss_step}, evaluation "
              f"{j.eval_step}; first reading at RATIO x the previous one: " + "; ".join(
                  f"{key} " + ", ".join(f"{r:g}x {first_jump(rows, key, r, after)}" for r in args.ratios)
                  for key in SIGNALS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
