"""What a run had logged when `false_comfort` first fired on it, harmful runs against the others, on the library.

`false_comfort` is critical: the spreads and ranks collapsing while the prediction agrees with the target ever more.
Its two false alarms on rounds 20-25 (the test split until round 26; round 22's `manytargets` lr x30 from 200,
round 24's `smallctx` lr x8 from 140) both came at the last reading of a run the library stopped, on an lr blow-up
the harm label calls benign. This
prints, for every fault run it fires on, how far each signal had fallen over the `--span` steps before its first
firing (the last reading at or before that step against the last one at or before the span's start) and how far the
prediction cosine had risen, as quantiles over the harmful runs and as a line for each benign or healthy run with the
share of harmful runs that fell less: a false alarm whose falls sit inside the harmful runs' is one nothing logged
tells apart. Read-only: it replays the recorded streams through the rules as they are.

    python research/false_comfort_falls.py               # both splits
    python research/false_comfort_falls.py --span 50
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detection import judge, library_cases  # noqa: E402
from ground_truth import readings  # noqa: E402
from library import load_case  # noqa: E402

# The signals false_comfort and its two parts read, and the loss a watcher would see; each as a fraction fallen.
FALLS = {"per-batch spread": "target/std_mean", "token rank": "target/token_effective_rank",
         "pooled rank": "target/effective_rank", "loss": "loss"}
COSINE = "pred_target/cosine"


def _at_or_before(series: dict[int, float], step: int) -> float | None:
    return series[max(s for s in series if s <= step)] if any(s <= step for s in series) else None


def movement(rows: list[dict], step: int, span: int) -> dict[str, float]:
    """For each of FALLS the fraction it fell over the `span` steps before `step`, and the cosine's rise (absolute);
    a signal without a reading at or before both ends is left out."""
    out: dict[str, float] = {}
    for name, key in (*FALLS.items(), ("cosine rise", COSINE)):
        series = readings(rows, key)
        now, then = _at_or_before(series, step), _at_or_before(series, step - span)
        if now is None or then is None or (name != "cosine rise" and then == 0):
            continue
        out[name] = now - then if name == "cosine rise" else 1 - now / then
    return out


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[round(q * (len(ordered) - 1))]


def share_below(values: list[float], value: float) -> float:
    """The share of `values` strictly below `value`: where a run sits among the harmful runs."""
    return sum(v < value for v in values) / len(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--span", type=int, default=100, help="steps before the first firing (default 100)")
    args = parser.parse_args(argv)
    harmful: list[dict[str, float]] = []
    others: list[tuple[str, str, int, dict[str, float]]] = []
    for case_dir in library_cases():
        j = judge(case_dir)
        fired = [a.step for a in j.alerts if a.rule == "false_comfort"]
        if not fired:
            continue
        moved = movement(load_case(case_dir)[1], fired[0], args.span)
        if j.harmful:
            harmful.append(moved)
        else:
            others.append((j.key, j.split, fired[0], moved))
    print(f"false_comfort fires on {len(harmful)} harmful runs and {len(others)} others (both splits); "
          f"movement over the {args.span} steps before its first firing")
    for name in (*FALLS, "cosine rise"):
        values = [m[name] for m in harmful if name in m]
        print(f"  {name:17s} harmful: min {min(values):+.3f}, 10th pct {quantile(values, 0.1):+.3f}, "
              f"median {quantile(values, 0.5):+.3f}, max {max(values):+.3f}")
    for key, split, step, moved in others:
        print(f"  {key} ({split}, not harmful) at {step}: " + ", ".join(
            f"{name} {value:+.3f} (above {share_below([m[name] for m in harmful if name in m], value):.0%})"
            for name, value in moved.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
