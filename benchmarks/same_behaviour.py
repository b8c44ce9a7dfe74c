"""Same behaviour across a refactor: train library cases with the code of a git revision and with the working tree,
on this machine, and compare every metric row exactly (time/, system/ and memory/ rows aside: they are the clock).

    python benchmarks/same_behaviour.py --rev bf13913                      # the default cases, 110 steps each
    python benchmarks/same_behaviour.py --rev HEAD~3 --cases tiny/healthy_s0 --until 400

Training is deterministic on one machine, so any difference is a change of behaviour. The recorded streams in
research/data/library are not the reference: another machine's kernels round differently in the last digits (retraining
a case here differs from its record in the 6th digit of target/norm_std), which is why both sides are trained here. Exit
1 when a case differs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIBRARY = REPO / "research" / "data" / "library"
CLOCK = ("time/", "system/", "memory/")
# Each kind of fault (settings, hooks, batch) and a noise-scale step (calib's weights_health cadence is 25).
DEFAULT_CASES = ("calib/collapse_3_at75_s2", "calib/mask_leak_0.5_at75_s2", "calib/target_copies_online_on_at75_s4",
                 "calib/target_gradients_on_at75_s0", "calib/frozen_target_on_at75_s3", "tiny/healthy_s0")


def train(code: Path, case: str, until: int, out: Path) -> list[dict]:
    config = LIBRARY / case / "config.toml"
    cmd = [sys.executable, "-m", "jepa_core.train", "--quiet", "--config", str(config), "--name", "run",
           "--set", f"logging.runs_dir={json.dumps(str(out))}", "--until", str(until)]
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, env=env, cwd=code, stdout=subprocess.DEVNULL)
    rows = (json.loads(line) for line in (out / "run" / "metrics.jsonl").read_text().splitlines())
    return [r for r in rows if "event" not in r]


def differences(old: list[dict], new: list[dict]) -> list[tuple]:
    found = [("rows", len(old), len(new))] if len(old) != len(new) else []
    for a, b in zip(old, new):
        for key in sorted(set(a) | set(b)):
            x, y = a.get(key), b.get(key)
            if key.startswith(CLOCK) or x == y or (x != x and y != y):  # NaN on both sides is the same reading
                continue
            found.append((a.get("step"), key, x, y))
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rev", required=True, help="the git revision to compare the working tree with")
    p.add_argument("--cases", nargs="*", default=list(DEFAULT_CASES), help="library cases (setting/name)")
    p.add_argument("--until", type=int, default=110, help="steps to train each case (default 110)")
    args = p.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="same-behaviour-") as tmp:
        before = Path(tmp) / "rev"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(before), args.rev], cwd=REPO, check=True)
        try:
            for case in args.cases:
                runs = [train(code, case, args.until, Path(tmp) / side / case.replace("/", "_"))
                        for code, side in ((before, "old"), (REPO, "new"))]
                diff = differences(*runs)
                failed += bool(diff)
                print(f"{case}: {len(runs[0])} rows to step {args.until}, {len(diff)} differences {diff[:3]}",
                      flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=REPO, check=False)
            shutil.rmtree(before, ignore_errors=True)
    print(f"{len(args.cases) - failed} of {len(args.cases)} cases identical to {args.rev}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
