"""Does a halving that the harm label reads at a run's last reading hold when the run is trained on?

The collapse part of the harm label (research/detection.py) asks the target's pooled rank or std to sit below half
of the healthy run's for two readings in a row, or at the key's last reading in the run: the library stops a fault
run a fixed window past its onset, and a halving under way there has no next reading to confirm it. This check is the
evidence for that clause. For every recorded fault run whose last reading of a collapse key is its first halved one,
it trains a scratch copy of the run's work directory on (`--steps` further, within the schedule) and prints the
ratio to the healthy run at each new reading of that key.

    python research/label_check.py               # every such run that has a work directory here
    python research/label_check.py --steps 90 warmup/lr_blowup_25_at300_s1

With --relabel, each named run is trained on whatever its label, and the label of the longer run is printed beside
the recorded one, with the collapse keys' ratios and the evaluation against the healthy run at each new reading: the
check for a run the label calls benign while its representation is still falling where the library stops it.

    python research/label_check.py --relabel --steps 100 manytargets/lr_blowup_30_at200_s1

It needs the library's work directories (runs/library-work, with every checkpoint), which exist only on the machine
that trained the library; runs without one are listed and skipped. Scratch copies go to a temporary directory and
are removed. Exit 1 when a pending halving did not hold at some new reading, or (--relabel) a label changed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detection import library_cases  # noqa: E402
from ground_truth import COLLAPSE_FRACTION, COLLAPSE_KEYS, EVAL_KEYS, harm, readings  # noqa: E402
from library import LIBRARY, REPO, SETTING, Case, _work_dir, load_case  # noqa: E402


def ratios(rows: list[dict], healthy: list[dict], key: str, after: int) -> list[tuple[int, float]]:
    """(step, reading / the healthy run's reading at that step) of `key` after step `after`."""
    ref = readings(healthy, key)
    return [(s, v / ref[s]) for s, v in readings(rows, key).items() if s > after and ref.get(s)]


def _load(case_dir: Path) -> tuple[Case, list[dict], list[dict]]:
    """The case, its rows and its healthy run's rows."""
    info, rows = load_case(case_dir)
    case = Case(info["setting"], info["seed"], info["fault"], info["magnitude"], info["onset"])
    return case, rows, load_case(case_dir.parent / f"healthy_s{case.seed}")[1]


def _pending(case: Case, rows: list[dict], healthy: list[dict]) -> tuple[str, int] | None:
    step, why = harm(rows, case.onset, healthy)
    key = next((k for k in COLLAPSE_KEYS if why == f"{k.split('/')[1]} halved"), None)
    if key is None:
        return None
    read = ratios(rows, healthy, key, case.onset)
    if read[-1][0] != step or (len(read) > 1 and read[-2][1] < COLLAPSE_FRACTION):
        return None
    return key, step


def pending(case_dir: Path) -> tuple[str, int] | None:
    """(key, step) where the harm label reads a run as collapsed only by the last-reading clause: the key's last
    reading after the onset is halved against the healthy run, the one before it (if any) was not, and nothing
    labelled the run harmful earlier. None otherwise."""
    return _pending(*_load(case_dir))


def train_on(case: Case, steps: int, scratch: Path) -> list[dict]:
    """Train a copy of the case's work run `steps` past its end (within its schedule); its rows after the end."""
    from jepa_core.metrics.stream import iter_rows  # noqa: PLC0415

    work, copy = _work_dir(case), scratch / case.setting / case.name
    (copy / "checkpoints").mkdir(parents=True)
    for name in ("metrics.jsonl", "meta.json", "config.toml"):
        shutil.copy2(work / name, copy / name)
    end = case.until()
    for name in ("init.pt", f"step_{end:07d}.pt", f"step_{end:07d}.pt.digest"):
        shutil.copy2(work / "checkpoints" / name, copy / "checkpoints" / name)
    until = min(SETTING[case.setting].steps, end + steps)
    done = subprocess.run([sys.executable, "-m", "jepa_core.train", "--quiet", "--until", str(until), "--resume",
                           str(copy)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{case.key}: training on failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return [row for row in iter_rows(copy / "metrics.jsonl") if "event" not in row and row["step"] > end]


def _label(harmed: tuple[int | None, str | None]) -> str:
    step, why = harmed
    return "benign" if step is None else f"harmful from {step} ({why})"


def relabel(case: Case, rows: list[dict], healthy: list[dict], later: list[dict]) -> tuple[bool, list[str]]:
    """(whether the label of the run trained on differs from the recorded one, lines saying what it read)."""
    before, after = harm(rows, case.onset, healthy), harm(rows + later, case.onset, healthy)
    lines = [f"{case.key}: recorded to {case.until()}: {_label(before)}; trained on to {later[-1]['step']}: "
             f"{_label(after)}"]
    for key in COLLAPSE_KEYS:
        new = ratios(later, healthy, key, case.until())
        lines.append(f"  {key} / healthy: " + (", ".join(f"{s}: {r:.2f}" for s, r in new) or "no new reading"))
    for key in EVAL_KEYS:
        ref = readings(healthy, key)
        new = [(s, v, ref[s]) for s, v in readings(later, key).items() if s in ref]
        lines.append(f"  {key} (healthy): " + (", ".join(f"{s}: {v:.3f} ({h:.3f})" for s, v, h in new)
                                                  or "no new reading"))
    return before != after, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="setting/name of library cases (default: every pending one)")
    parser.add_argument("--steps", type=int, default=90, help="steps to train past the run's end (default 90)")
    parser.add_argument("--relabel", action="store_true",
                        help="train every named case on, pending or not, and print the longer run's label")
    args = parser.parse_args(argv)
    if args.relabel and not args.cases:
        parser.error("--relabel needs the cases to train on")
    dirs = ([LIBRARY / name for name in args.cases] if args.cases else
            [d for d in library_cases() if not d.name.startswith("healthy_")])
    held, broke = 0, 0
    with tempfile.TemporaryDirectory(prefix="label-check-") as scratch:
        for case_dir in dirs:
            case, rows, healthy = _load(case_dir)
            found = _pending(case, rows, healthy)
            if found is None and not args.relabel:
                continue
            name = case.key
            if case.until() >= SETTING[case.setting].steps:
                print(f"{name}: ends at its schedule's end; nothing to train on")
                continue
            if not (_work_dir(case) / "checkpoints" / f"step_{case.until():07d}.pt").is_file():
                print(f"{name}: no work directory here; skipped")
                continue
            later = train_on(case, args.steps, Path(scratch))
            if args.relabel:
                changed, lines = relabel(case, rows, healthy, later)
                print("\n".join(lines))
                held, broke = held + (not changed), broke + changed
                continue
            key, step = found
            new = ratios(later, healthy, key, case.until())
            ok = bool(new) and all(r < COLLAPSE_FRACTION for _, r in new)
            held, broke = held + ok, broke + (not ok)
            shown = ", ".join(f"{s}: {r:.2f}" for s, r in new) or "no new reading"
            print(f"{name} {key} halved at {step} and {'held' if ok else 'DID NOT hold'} ({shown})")
    if args.relabel:
        print(f"{held} labels unchanged trained on, {broke} changed")
    else:
        print(f"{held} pending halvings held at every new reading, {broke} did not")
    return 1 if broke else 0


if __name__ == "__main__":
    raise SystemExit(main())
