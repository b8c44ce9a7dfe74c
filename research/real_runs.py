"""The runs of issue 45 on real handwritten digits, as a new user makes them: the `tiny` preset with only the data
changed (and the evaluation every 100 steps). Trained from the archive that `research/real_images.py digits`
builds, recorded (streams and configs only, gzipped: never the data) under research/data/real/digits/, and judged by the
rules as `jepa doctor` judges them.

    python research/real_images.py digits                  # the archive, once
    python research/real_runs.py --train --out /tmp/real   # train the four runs (about 10 minutes on 2 cores)
    python research/real_split.py                          # all the real-image runs, judged by the harm label
    python research/real_runs.py --train --out /tmp/real --record
    python research/real_runs.py                           # judge the recorded runs

What each run must show (issue 45): the two healthy-by-switch runs whose features end worse than random init (seeds
31 and 32, no fault) raise a critical alert by step 500; the collapse (seed 33, from step 250) and the lr x20 (seed 36, from step
300) raise one before their probe has fallen 10 points below its best.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from jepa_core.alerts.engine import evaluate_rows
from jepa_core.metrics.stream import iter_rows, stream_file
from jepa_core.workbench.doctor import run_facts

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "research"))
RECORD_DIR = REPO / "research" / "data" / "real" / "digits"
ARCHIVE = Path.home() / ".cache" / "jepa-workbench" / "digits.npz"
EVAL_KEYS = ("linear_probe/val_acc", "knn/accuracy")


@dataclass(frozen=True)
class RealRun:
    name: str
    seed: int
    steps: int
    overrides: tuple[str, ...] = ()
    critical_by: int | None = None  # a critical alert at or before this step
    before_fall: float | None = None  # ... or before the probe has fallen this far below its best


RUNS = (
    RealRun("healthy_s31", 31, 800, critical_by=500),
    RealRun("healthy_s32", 32, 800, critical_by=500),
    RealRun("collapse_1_at250_s33", 33, 600, ("faults.collapse_weight=1.0", "faults.start_step=250"),
            before_fall=0.10),
    RealRun("lr_blowup_20_at300_s36", 36, 600, ("faults.lr_blowup_factor=20.0", "faults.start_step=300"),
            before_fall=0.10),
)


def train(run: RealRun, out: Path, archive: Path) -> Path:
    sets = ['data.dataset="npz"', f'data.path="{archive}"', f'logging.runs_dir="{out}"',
            "diagnostics.eval_every_steps=100", "eval.probe_epochs=20", f"optim.steps={run.steps}",
            f"runtime.seed={run.seed}", *run.overrides]
    command = [sys.executable, "-m", "jepa_core.train", "--preset", "tiny", "--quiet", "--name", run.name]
    for item in sets:
        command += ["--set", item]
    subprocess.run(command, check=True)
    return out / run.name


def record(run_dir: Path, into: Path) -> None:
    """The run's config and its stream thinned as the detection library's are (research/library.py `thin_rows`: the
    rows a resume replaced resolved, no events or machine timings, six significant digits where the rules allow),
    gzipped with mtime 0 so that the same stream gives the same bytes."""
    from library import write_thinned  # noqa: PLC0415 (research/ is on sys.path: see REPO above)

    into.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run_dir / "config.toml", into / "config.toml")
    write_thinned(list(iter_rows(stream_file(run_dir))), None, into / "metrics.jsonl.gz")


def judge(run: RealRun, run_dir: Path) -> tuple[bool, str]:
    """(the run meets what it must show, a line saying what happened)."""
    rows = [r for r in iter_rows(stream_file(run_dir)) if "event" not in r]
    alerts = evaluate_rows(rows, **run_facts(run_dir))
    critical = next((a for a in alerts if a.severity == "critical"), None)
    probe = {r["step"]: r[EVAL_KEYS[0]] for r in rows if EVAL_KEYS[0] in r}
    evals = " ".join(f"{s}:{v:.3f}" for s, v in sorted(probe.items()))
    if critical is None:
        return False, f"{run.name}: no critical alert; probe {evals}"
    if run.critical_by is not None:
        ok = critical.step <= run.critical_by
        need = f"by step {run.critical_by}"
    else:
        best = max(v for s, v in probe.items() if s <= critical.step)
        # the probe's fall at the alert: its last reading at or before the alert, against its best so far
        fall = best - probe[max(s for s in probe if s <= critical.step)]
        fallen_by = max(best - v for s, v in probe.items() if s <= critical.step)
        ok = fallen_by < run.before_fall
        need = f"before the probe fell {100 * run.before_fall:.0f} points (fallen {100 * fall:.1f} at the alert)"
    return ok, (f"{run.name}: critical {critical.rule} at step {critical.step} ({'met' if ok else 'MISSED'}: "
                f"{need}); probe {evals}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", action="store_true", help="train the runs (needs the digits archive)")
    p.add_argument("--out", type=Path, default=Path("runs/real"), help="where --train writes the run directories")
    p.add_argument("--archive", type=Path, default=ARCHIVE)
    p.add_argument("--record", action="store_true",
                   help="copy the trained runs' streams into research/data/real/digits/")
    args = p.parse_args(argv)
    if args.train and not args.archive.is_file():
        sys.exit(f"real_runs: {args.archive} not found: build it with `python research/real_images.py digits`")
    missed = 0
    for run in RUNS:
        run_dir = train(run, args.out, args.archive) if args.train else RECORD_DIR / run.name
        if args.record:
            record(run_dir, RECORD_DIR / run.name)
        ok, line = judge(run, run_dir)
        missed += not ok
        print(line)
    print(f"{len(RUNS) - missed}/{len(RUNS)} runs show what they must")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
