"""Harmful collapses the rules miss (or catch only after their harm), each against the healthy runs of the library
that moved at least as far toward a collapse over the same span.

A collapse that starts while a run's first descent is still under way (rounds 26-27: `flatlr` from step 130,
`thinpred` from 110) continues that descent at a pace healthy first descents also keep on other settings. For each
such miss this prints what moved between its onset and its harm step (the falls of the fixed-batch and per-batch
spreads, the token and pooled ranks and the loss, the prediction cosine's rise, and how deep the fixed-batch spread
stood below its peak) and the healthy runs that, over a span of the same length ending at one of their readings,
moved at least as far in every one of them. A threshold on how far these signals moved over such a span (a fall, a
depth, a rise of the cosine, or any combination that asks more of each) cannot fire on such a miss by its harm step
without firing on those healthy runs too; what is left to tell them apart is the path within the span (how the
trends of jepa_core.alerts read it: they did not fire either) and the run without the fault (the harm label's
counterfactual, which no live rule has). Read-only: it replays the recorded streams through the rules as they are.

    python research/descent_lookalikes.py
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detection import judge, library_cases  # noqa: E402
from false_comfort_falls import _at_or_before, movement  # noqa: E402
from ground_truth import readings  # noqa: E402
from library import load_case  # noqa: E402

from jepa_core.config import RulesConfig  # noqa: E402

FIXED = "target/fixed_batch_std_mean"
WARMUP_STEPS = RulesConfig().warmup_steps  # the rules build no reference before this step


def signature(rows: list[dict], step: int, span: int) -> dict[str, float]:
    """What moved toward a collapse over the `span` steps before `step`: `movement`'s falls and cosine rise, the
    fixed-batch spread's fall, and its depth below its highest reading so far."""
    moved = movement(rows, step, span)
    fixed = readings(rows, FIXED)
    now, then = _at_or_before(fixed, step), _at_or_before(fixed, step - span)
    if now is not None and then:
        moved["fixed-batch spread"] = 1 - now / then
        moved["depth below peak"] = 1 - now / max(v for s, v in fixed.items() if s <= step)
    return moved


def dominates(healthy: dict[str, float], miss: dict[str, float]) -> bool:
    """The healthy run moved at least as far as the miss in every signal the miss has (and has them all)."""
    return bool(miss) and all(name in healthy and healthy[name] >= value for name, value in miss.items())


def first_lookalike(rows: list[dict], miss: dict[str, float], span: int) -> int | None:
    """The first reading of a healthy run at which its last `span` steps dominate the miss's, or None."""
    steps = sorted({row["step"] for row in rows if "target/std_mean" in row})
    return next((s for s in steps if s - span >= WARMUP_STEPS and dominates(signature(rows, s, span), miss)), None)


@dataclass
class Miss:
    key: str
    split: str
    onset: int
    harm_step: int
    first_alert: int | None
    moved: dict[str, float]


def late_collapses() -> tuple[list[Miss], dict[str, list[dict]]]:
    """Every harmful collapse with no alert by its harm step, and every healthy run's rows by key."""
    misses, healthy = [], {}
    for case_dir in library_cases():
        info, rows = load_case(case_dir)
        if info["fault"] is None:
            healthy[f"{info['setting']}/{case_dir.name}"] = rows
            continue
        if info["fault"] != "collapse":
            continue
        j = judge(case_dir)
        if j.harmful and (j.first is None or j.first > j.harm_step):
            span = j.harm_step - j.onset
            misses.append(Miss(j.key, j.split, j.onset, j.harm_step, j.first, signature(rows, j.harm_step, span)))
    return misses, healthy


def main(argv: list[str] | None = None) -> int:
    misses, healthy = late_collapses()
    print(f"{len(misses)} harmful collapses with no alert by their harm step; {len(healthy)} healthy runs")
    for miss in misses:
        span = miss.harm_step - miss.onset
        caught = "never alerted" if miss.first_alert is None else f"first alert at {miss.first_alert}"
        print(f"{miss.key} ({miss.split}; onset {miss.onset}, harm {miss.harm_step}, {caught}); over its "
              f"{span} steps: " + ", ".join(f"{name} {value:+.3f}" for name, value in miss.moved.items()))
        found = {key: step for key, rows in healthy.items()
                 if (step := first_lookalike(rows, miss.moved, span)) is not None}
        settings = sorted({key.split("/")[0] for key in found})
        print(f"  healthy runs that moved at least as far in every signal over {span} steps: {len(found)}"
              + (f" on {', '.join(settings)}; e.g. " + ", ".join(f"{k} at {s}" for k, s in list(found.items())[:3])
                 if found else " (none moved as far in every measure)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
