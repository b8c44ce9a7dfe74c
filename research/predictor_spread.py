"""The predictor's output spread over the batch (`pred/std_mean`) against its own recent high, on every recorded case
of a split: what `predictor_collapse` is chosen from.

A predictor that stops reading its context answers every target alike, and its spread over the batch falls within
a reading; a healthy one moves slowly. For each healthy run this prints its lowest fraction (a reading over the
highest of the previous `rules.predictor_collapse_window_steps` steps, from the rules' warm-up on); for the fault
runs, how many fall below `rules.predictor_collapse_fraction`, harmful and benign, and the harmful runs where that
comes before every other rule's first alert. Tuning split unless asked (the test split is for reporting).

    python research/predictor_spread.py
    python research/predictor_spread.py --set rules.predictor_collapse_window_steps=60
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detection import judge, library_cases, study_arguments, whole_rows  # noqa: E402
from library import Case  # noqa: E402

from jepa_core.config import RulesConfig  # noqa: E402

SPREAD = "pred/std_mean"


def fractions(rows: list[dict], rules: RulesConfig, after: int = -1) -> list[tuple[int, float]]:
    """(step, reading / highest reading of the window before it) at every reading from the rules' warm-up on and
    after `after`: the quantity predictor_collapse compares with its fraction."""
    readings = [(r["step"], float(r[SPREAD])) for r in rows
                if isinstance(r.get(SPREAD), (int, float)) and math.isfinite(r[SPREAD])]
    out = []
    for i, (step, value) in enumerate(readings):
        before = [v for s, v in readings[:i] if step - s <= rules.predictor_collapse_window_steps]
        if before and max(before) > 0 and step >= rules.warmup_steps and step > after:
            out.append((step, value / max(before)))
    return out


def main(argv: list[str] | None = None) -> int:
    args, rules = study_arguments(__doc__, argv)
    without = replace(rules, predictor_collapse_fraction=0.0)
    healthy, harmful, benign, first = [], [], [], []
    for case_dir in library_cases(args.library):
        info, rows, _ = whole_rows(case_dir)
        if args.split not in (Case(info["setting"], info["seed"]).split, "both"):
            continue
        key = f"{info['setting']}/{case_dir.name}"
        if info["fault"] is None:
            healthy.append((min((f for _, f in fractions(rows, rules)), default=math.inf), key))
            continue
        low = [s for s, f in fractions(rows, rules, info["onset"]) if f < rules.predictor_collapse_fraction]
        if not low:
            continue
        others = judge(case_dir, without)
        (harmful if others.harmful else benign).append(key)
        if others.harmful and (others.first is None or low[0] < others.first):
            first.append(f"{key} at {low[0]} (others {others.first}, loss {others.loss_step}, harm {others.harm_step})")
    print(f"{SPREAD} over its highest of the last {rules.predictor_collapse_window_steps} steps, {args.split} split, "
          f"from step {rules.warmup_steps}: predictor_collapse fires below {rules.predictor_collapse_fraction:g}")
    print(f"healthy runs {len(healthy)}, lowest fractions: "
          + ", ".join(f"{low:.3f} {key}" for low, key in sorted(healthy)[:6]))
    print(f"healthy runs below the fraction: {sum(low < rules.predictor_collapse_fraction for low, _ in healthy)}")
    print(f"fault runs below it after the onset: {len(harmful)} harmful, {len(benign)} benign")
    print(f"harmful runs where it comes before every other rule's first alert: {len(first)}")
    print("\n".join(f"  {line}" for line in first))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
