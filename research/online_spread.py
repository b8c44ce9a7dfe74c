"""The online encoder's spread on the fixed probe batch against the target's (`online/fixed_batch_std_mean`, logged
since round 32), on every recorded case of a split that carries it: what `online_collapse` is chosen from.

A collapse starts in the online (context) encoder, which the gradient moves; the target follows only through the
EMA, hundreds of steps behind. So the ratio online/target drops at once, while the target's spread, which every
other variance rule reads, may still look like a healthy first descent. Healthy online encoders dip below their
target early in a run too, but over several readings. For each healthy run this prints its lowest ratio and the
largest fall (the highest ratio of the last `rules.online_lead_window_steps` steps over the current one) at any
reading below `rules.online_lead_floor`, with its step in lr warm-ups (the rule judges from
`rules.online_lead_after_warmups` of them), and whether the rule fired; for each fault run its harm step, the first
alert of the rules without `online_collapse`, and that rule's first alert and fall. Tuning split unless asked (the
test split is for reporting).

    python research/online_spread.py
    python research/online_spread.py --set rules.online_lead_floor=0.2    # judged at another threshold
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detection import judge, library_cases, study_arguments  # noqa: E402
from library import LIBRARY, Case, load_case  # noqa: E402

from jepa_core.config import RulesConfig  # noqa: E402
from jepa_core.workbench.doctor import run_facts  # noqa: E402

ONLINE, TARGET = "online/fixed_batch_std_mean", "target/fixed_batch_std_mean"


def ratios(rows: list[dict], warmup: int) -> list[tuple[int, float]]:
    """(step, online spread / target spread) at every fixed-batch reading from the rules' warm-up on."""
    return [(r["step"], r[ONLINE] / r[TARGET]) for r in rows
            if r["step"] >= warmup and ONLINE in r and TARGET in r and r[TARGET] > 0]


def largest_fall(series: list[tuple[int, float]], rules: RulesConfig, after: int = -1) -> tuple[float, int | None]:
    """(fall, step): the largest (highest ratio in the window before a reading) / (its ratio) at a reading after
    `after` whose ratio is below the floor; (0, None) when no reading is below it with a reading before it."""
    best: tuple[float, int | None] = (0.0, None)
    for i, (step, ratio) in enumerate(series):
        before = [r for s, r in series[:i] if step - s <= rules.online_lead_window_steps]
        if step > after and before and ratio < rules.online_lead_floor and max(before) / ratio > best[0]:
            best = (max(before) / ratio, step)
    return best


def main(argv: list[str] | None = None) -> int:
    args, rules = study_arguments(__doc__, argv)
    without = replace(rules, online_lead_floor=0.0)
    healthy, faults = [], []
    for case_dir in library_cases(args.library):
        info, rows = load_case(case_dir)
        split = Case(info["setting"], info["seed"]).split
        series = ratios(rows, rules.warmup_steps)
        if (args.split != "both" and split != args.split) or not series:
            continue
        key = f"{info['setting']}/{case_dir.name}"
        if info["fault"] is None:
            schedule = run_facts(case_dir)["lr_schedule"]
            warmup = schedule.warmup_steps if schedule is not None else None
            fired = any(a.rule == "online_collapse" for a in judge(case_dir, rules).alerts)
            healthy.append((min(r for _, r in series), key, *largest_fall(series, rules), warmup, fired))
        else:
            before, mine = judge(case_dir, without), judge(case_dir, rules)
            own = min((a.step for a in mine.alerts if a.rule == "online_collapse"), default=None)
            faults.append((key, before.harm_step, before.first, own, largest_fall(series, rules, info["onset"])[0]))
    print(f"online/target spread on the fixed batch, {args.split} split: floor {rules.online_lead_floor:g}, fall "
          f"{rules.online_lead_fall:g}x within {rules.online_lead_window_steps} steps, from step {rules.warmup_steps} "
          f"and {rules.online_lead_after_warmups:g} lr warm-ups")
    fires = [h for h in healthy if h[-1]]
    print(f"healthy runs {len(healthy)}: online_collapse fires on {len(fires)}; largest fall below the floor "
          f"{max((h[2] for h in healthy), default=0):.2f}x")
    for low, key, fall, step, warmup, fired in sorted(healthy, key=lambda h: -h[2])[:8]:
        at = "never below the floor"
        if step is not None:
            at = f"{fall:.2f}x at step {step}" + (f" ({step / warmup:.1f} warm-ups)" if warmup else "")
        verdict = "fires" if fired else "silent"
        print(f"  lowest ratio {low:.3f}, largest fall below the floor {at:<38} {verdict}  {key}")
    print(f"fault runs {len(faults)}: harm step, the rules' first alert without online_collapse, its first alert "
          "(largest fall below the floor after the onset)")
    for key, harm_step, first, own, fall in sorted(faults):
        label = "harmful" if harm_step is not None else "benign "
        print(f"  {label} harm {harm_step!s:>5}  others {first!s:>5}  online_collapse {own!s:>5} ({fall:.2f}x)  {key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
