"""Does the default `tiny` run learn? Linear probe and kNN of the target encoder, at random init and after training.

Runs the `tiny` preset exactly as `jepa train` does (its own evaluation at step 0 is the random-init baseline of the
same architecture), times it, prints the table and exits 1 when the probe gains fewer than `--min-gain` points.
`--record` copies the run, thinned to config, meta, metrics and the last artifacts, to data/runs/tiny-default/ so
tests and notebooks can open it without training.

    python benchmarks/tiny_learns.py                  # about 4 minutes on 2 CPU cores
    python benchmarks/tiny_learns.py --seeds 0 1 2 --record   # every seed must gain; seed 0 is recorded
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

from jepa_core.config import preset
from jepa_core.metrics.reader import read_metrics
from jepa_core.run.trainer import Trainer

REPO = Path(__file__).resolve().parent.parent
RECORD = REPO / "data" / "runs" / "tiny-default"
EVAL_KEYS = ("linear_probe/val_acc", "linear_probe/train_acc", "knn/accuracy")


def eval_rows(metrics: Path):
    frame = read_metrics(metrics).scalars
    return frame.dropna(subset=["linear_probe/val_acc"])[["step", *EVAL_KEYS]].reset_index(drop=True)


def record(run: Path) -> None:
    if RECORD.exists():
        shutil.rmtree(RECORD)
    (RECORD / "artifacts").mkdir(parents=True)
    for name in ("config.toml", "meta.json", "metrics.jsonl"):
        shutil.copy2(run / name, RECORD / name)
    last = sorted((run / "artifacts").glob("*.png"))[-2:]
    for png in last:
        for path in (png, png.with_suffix(".json")):
            shutil.copy2(path, RECORD / "artifacts" / path.name)


def run_seed(seed: int, min_gain: float, record_run: bool) -> float:
    """Train the preset once with `seed`, print its evaluation table, return the probe gain in accuracy units."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = preset("tiny")
        cfg.runtime.seed = seed
        cfg.logging.progress_bar = False
        run = Path(tmp) / "tiny-default"
        t0 = time.perf_counter()
        status = Trainer(cfg, run_dir=run, quiet=True).run()
        wall = time.perf_counter() - t0
        rows = eval_rows(run / "metrics.jsonl")
        first, last = rows.iloc[0], rows.iloc[-1]
        gain = last["linear_probe/val_acc"] - first["linear_probe/val_acc"]
        print(f"tiny preset, seed {seed}, {cfg.optim.steps} steps x batch {cfg.optim.batch_size}, "
              f"{torch.get_num_threads()} threads, status {status}, wall {wall:.0f} s (including evaluations)")
        print(f"{'step':>6}{'probe val':>11}{'probe train':>13}{'kNN':>8}")
        for _, r in rows.iterrows():
            print(f"{int(r['step']):>6}{r['linear_probe/val_acc']:>11.3f}{r['linear_probe/train_acc']:>13.3f}"
                  f"{r['knn/accuracy']:>8.3f}")
        print(f"linear probe gain over random init: {100 * gain:+.1f} points (target >= {100 * min_gain:.0f}); "
              f"kNN {100 * (last['knn/accuracy'] - first['knn/accuracy']):+.1f} points", flush=True)
        if record_run:
            meta = json.loads((run / "meta.json").read_text())
            meta["benchmark_wall_seconds"] = round(wall, 1)
            (run / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
            record(run)
            print(f"recorded to {RECORD.relative_to(REPO)}")
    return float(gain)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run per seed (the first is recorded)")
    parser.add_argument("--min-gain", type=float, default=0.08)
    parser.add_argument("--record", action="store_true", help="record the first seed's run")
    args = parser.parse_args()
    gains = [run_seed(seed, args.min_gain, args.record and i == 0) for i, seed in enumerate(args.seeds)]
    if len(gains) > 1:
        print("gains by seed: " + ", ".join(f"{s}: {100 * g:+.1f}" for s, g in zip(args.seeds, gains))
              + f" points; smallest {100 * min(gains):+.1f}")
    return 0 if min(gains) >= args.min_gain else 1


if __name__ == "__main__":
    sys.exit(main())
