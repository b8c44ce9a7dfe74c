"""Does a rule's verdict depend on how many steps a run takes to do the same thing? Every library case replayed as
recorded and with its steps stretched by a factor: the rows' steps, the schedule the rules read (optim.steps and
optim.warmup_steps, so the lr schedule) and the cadences (the run's clock) multiplied alike. Rules whose time constants are fractions of the run's own
schedule, or numbers of readings, raise the same alerts at the stretched steps; rules that count steps do not.

    python research/stretched_replay.py [--factor 10] [--sample N] [--cases]

It prints how many cases draw the same alerts (rule, severity, metric, step x factor) and, per rule, how many cases
it differs on; it exits 1 unless every case is identical.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from detection import library_cases, whole_rows  # noqa: E402

from jepa_core.alerts.engine import evaluate_rows  # noqa: E402
from jepa_core.method.schedules import LrSchedule  # noqa: E402
from jepa_core.workbench.doctor import run_facts  # noqa: E402


def stretched(rows: list[dict], factor: int) -> list[dict]:
    return [{**row, "step": row["step"] * factor} for row in rows]


def stretched_facts(facts: dict, factor: int) -> dict:
    """The run's facts with its schedule and its clock (cadence, warm-up, length) stretched alike."""
    out = dict(facts)
    schedule, clock = facts.get("lr_schedule"), facts.get("clock")
    if schedule is not None:
        out["lr_schedule"] = LrSchedule(schedule.lr, schedule.start_lr, schedule.final_lr,
                                        schedule.warmup_steps * factor, schedule.steps * factor)
    if clock is not None:
        out["clock"] = clock.stretched(factor)
    return out


def alert_keys(alerts, factor: int = 1) -> set[tuple]:
    return {(a.rule, a.severity, a.metric, a.step * factor) for a in alerts}


def compare(case_dir: Path, factor: int) -> tuple[set[tuple], set[tuple]]:
    """(alerts of the case as recorded with steps multiplied, alerts of the stretched replay)."""
    _, rows, _ = whole_rows(case_dir)
    facts = run_facts(case_dir)
    plain = evaluate_rows(rows, **facts)
    stretched_alerts = evaluate_rows(stretched(rows, factor), **stretched_facts(facts, factor))
    return alert_keys(plain, factor), alert_keys(stretched_alerts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--factor", type=int, default=10)
    p.add_argument("--sample", type=int, default=0, help="judge this many cases drawn at random (seed 0); 0: all")
    p.add_argument("--cases", action="store_true", help="one line per case that differs")
    args = p.parse_args(argv)
    if args.factor < 2:
        p.error("--factor must be at least 2")
    cases = library_cases()
    if args.sample:
        cases = sorted(random.Random(0).sample(cases, min(args.sample, len(cases))))
    same, by_rule = 0, Counter()
    for case in cases:
        plain, stretched_alerts = compare(case, args.factor)
        if plain == stretched_alerts:
            same += 1
            continue
        rules = {key[0] for key in plain ^ stretched_alerts}
        by_rule.update(rules)
        if args.cases:
            print(f"  {case.parent.name}/{case.name}: only as recorded {sorted(plain - stretched_alerts)}; "
                  f"only stretched {sorted(stretched_alerts - plain)}")
    print(f"stretched x{args.factor}: {same}/{len(cases)} cases draw the same alerts at {args.factor}x the steps")
    for rule, count in by_rule.most_common():
        print(f"  {rule:<20} differs on {count} cases")
    return 0 if same == len(cases) else 1


if __name__ == "__main__":
    raise SystemExit(main())
