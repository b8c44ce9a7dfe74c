"""How far a healthy run's gradient norm strays above its running level, on the detection library.

The divergence rule reads `grad_norm` against a robust running level (its `_LevelShift` baseline) and warns on one
reading above `rules.divergence_grad_spike_factor` times it. A moderate lr blow-up can lift the gradient two- or
threefold for a few readings before anything else moves (round 23's `smallctx` lr x35 from step 140: 2.4x and 1.9x);
this counts how often healthy runs do the same, i.e. what a lower factor, or one held for several readings, would
cost in warnings on healthy runs. Read-only: it replays the recorded streams through the rule as it is.

    python research/grad_norm_health.py                       # the tuning split, 2 readings in a row
    python research/grad_norm_health.py --readings 3 --ratios 1.5 2 3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detection import library_cases  # noqa: E402
from library import Case, load_case  # noqa: E402

from jepa_core.alerts.rules import DivergenceRule  # noqa: E402
from jepa_core.config.rules import RulesConfig  # noqa: E402


def level_ratios(rows: list[dict], cfg: RulesConfig) -> list[tuple[int, float]]:
    """(step, grad_norm / the divergence rule's running level before that reading), from the rule's warm-up on and
    once the level has `min_readings` readings (when the rule itself would judge)."""
    rule, out = DivergenceRule(cfg), []
    shift = rule.shifts["grad_norm"]
    for row in rows:
        if "grad_norm" in row and row["step"] >= cfg.divergence_warmup_steps:
            level = shift.baseline_value
            if level and shift.baseline.count >= cfg.min_readings:
                out.append((row["step"], row["grad_norm"] / level))
        rule.update(row)
    return out


def first_run(ratios: list[tuple[int, float]], at_least: float, readings: int) -> int | None:
    """The step at which `readings` readings in a row have been at `at_least` times the level or more."""
    streak = 0
    for step, ratio in ratios:
        streak = streak + 1 if ratio >= at_least else 0
        if streak >= readings:
            return step
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=["tune", "test"], default="tune")
    parser.add_argument("--readings", type=int, default=2, help="readings in a row at the ratio or above")
    parser.add_argument("--ratios", type=float, nargs="+", default=[1.6, 1.8, 2.0, 2.5, 3.0])
    args = parser.parse_args(argv)
    cfg = RulesConfig()
    healthy: dict[str, list[tuple[int, float]]] = {}
    for case_dir in library_cases():
        info, rows = load_case(case_dir)
        if info["fault"] is None and Case(info["setting"], info["seed"]).split == args.split:
            healthy[f"{info['setting']}/{case_dir.name}"] = level_ratios(rows, cfg)
    print(f"{args.split} split: {len(healthy)} healthy runs; grad_norm against the divergence rule's running level")
    for ratio in args.ratios:
        hit = [key for key, ratios in healthy.items() if first_run(ratios, ratio, args.readings) is not None]
        print(f"  {args.readings} readings in a row at {ratio:g}x or more: {len(hit)} of {len(healthy)} healthy runs"
              + (f" (e.g. {', '.join(hit[:3])})" if hit else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
